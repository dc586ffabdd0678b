//! JSON this tool reads (receipts, tapes, traces) held to what it writes: an object with the
//! same key twice is refused, naming the key and where it sits. serde_json's `Value` keeps the
//! last of two equal keys without a word, so a receipt edited (or damaged) to carry a second
//! `schema` or a second logits hash would be read as whichever came last, and `diff` could
//! call two different files "same".

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Parses `text` as JSON into a `Value`, refusing an object with a repeated key. The error
/// reads `not valid JSON: ` and serde_json's message for text that is not JSON, else names
/// the repeated key and its path (`a.b[3]`).
pub fn parse_unique(text: &str) -> Result<serde_json::Value, String> {
    let v = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize::<_, Unique>(&mut de).map_err(|e| {
        let at = e.path().to_string();
        let err = e.into_inner().to_string();
        if at == "." {
            err
        } else {
            format!("{err} (in {at})")
        }
    })?;
    Ok(v)
}

/// Any JSON value, checked for repeated keys on the way (the value itself is dropped).
struct Unique;

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Unique;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_str<E>(self, _: &str) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_unit<E>(self) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Unique, A::Error> {
        while a.next_element::<Unique>()?.is_some() {}
        Ok(Unique)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Unique, A::Error> {
        let mut seen = HashSet::new();
        while let Some(k) = a.next_key::<String>()? {
            if !seen.insert(k.clone()) {
                return Err(de::Error::custom(format!(
                    "key {:?} appears twice in one object",
                    clip(&k)
                )));
            }
            a.next_value::<Unique>()?;
        }
        Ok(Unique)
    }
}

/// A name from a file, cut for an error message: at most 80 characters, then how long it was.
pub fn clip(s: &str) -> String {
    const MAX: usize = 80;
    match s.char_indices().nth(MAX) {
        None => s.to_string(),
        Some((i, _)) => format!("{}… ({} bytes)", &s[..i], s.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_refused_naming_it_and_its_path() {
        assert!(parse_unique(r#"{"a": 1, "b": [{"c": 1, "d": 2}]}"#).is_ok());
        // The same key in two different objects is fine.
        assert!(parse_unique(r#"{"a": {"x": 1}, "b": {"x": 1}}"#).is_ok());
        let e = parse_unique(r#"{"schema": "x", "schema": "y"}"#).unwrap_err();
        assert!(e.contains("key \"schema\" appears twice"), "{e}");
        let e = parse_unique(r#"{"a": [{"c": 1}, {"c": 1, "c": 2}]}"#).unwrap_err();
        assert!(
            e.contains("\"c\" appears twice") && e.contains("a[1]"),
            "{e}"
        );
        // Not JSON: serde_json's own message, said so.
        let e = parse_unique("{").unwrap_err();
        assert!(
            e.starts_with("not valid JSON: ") && e.contains("EOF"),
            "{e}"
        );
        // What parses is what serde_json gives.
        let v = parse_unique(r#"{"a": [1, 2.5, null, "s", true]}"#).unwrap();
        assert_eq!(v["a"][1], 2.5);
    }

    #[test]
    fn clip_cuts_long_names_and_says_how_long() {
        assert_eq!(clip("short"), "short");
        let long = "k".repeat(10_000_000);
        let c = clip(&long);
        assert!(c.len() < 120 && c.ends_with("(10000000 bytes)"), "{c}");
        assert_eq!(clip(&"é".repeat(80)), "é".repeat(80));
    }
}
