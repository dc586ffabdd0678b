//! JSON this tool reads (receipts, tapes, traces) held to what it writes: an object with the
//! same key twice is refused, naming the key and where it sits. serde_json's `Value` keeps the
//! last of two equal keys without a word, so a receipt edited (or damaged) to carry a second
//! `schema` or a second logits hash would be read as whichever came last, and `diff` could
//! call two different files "same".

use std::collections::{HashMap, HashSet};
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

/// Every number of a JSON text that a `serde_json::Value` cannot show as written, by its
/// JSON pointer (`/tokens/1`; RFC 6901), with its literal. serde_json reads a number that is
/// not an integer in u64 or i64 (a fraction, an exponent, `-0`, an integer past 2^64) as an
/// f64, so `18446744073709551616` would come back as `1.8446744073709552e+19`: an error
/// about such a value echoes the literal from here instead (`Literals::show`), the text the
/// user wrote. For text that parsed as JSON (the scan trusts its structure); built only on
/// an error's path (`as_written`), so a valid file costs no second pass.
struct Literals(HashMap<String, String>);

/// The value `v` found at `pointer` of the JSON `text`, as an error quotes it: a number as
/// the text wrote it (`Literals`), anything else as JSON.
pub fn as_written(text: &str, pointer: &str, v: &serde_json::Value) -> String {
    Literals::of(text).show(pointer, v)
}

impl Literals {
    fn of(text: &str) -> Literals {
        // Where the scan is: each open container, an array's current index or an object's
        // current key.
        enum Frame {
            Arr(usize),
            Obj(String),
        }
        let pointer = |stack: &[Frame]| -> String {
            stack
                .iter()
                .map(|f| match f {
                    Frame::Arr(i) => format!("/{i}"),
                    Frame::Obj(k) => format!("/{}", k.replace('~', "~0").replace('/', "~1")),
                })
                .collect()
        };
        let b = text.as_bytes();
        let mut stack: Vec<Frame> = Vec::new();
        let mut out = HashMap::new();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'"' => {
                    // A string ends at the next quote no backslash escapes. One followed by a
                    // colon is an object's key: the key of the values after it.
                    let start = i;
                    i += 1;
                    while i < b.len() && b[i] != b'"' {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                    i = (i + 1).min(b.len());
                    let is_key = text
                        .get(i..)
                        .is_some_and(|rest| rest.trim_start().starts_with(':'));
                    if let (true, Some(Frame::Obj(k))) = (is_key, stack.last_mut()) {
                        *k = text
                            .get(start..i)
                            .and_then(|s| serde_json::from_str(s).ok())
                            .unwrap_or_default();
                    }
                    continue;
                }
                b'{' => stack.push(Frame::Obj(String::new())),
                b'[' => stack.push(Frame::Arr(0)),
                b'}' | b']' => {
                    stack.pop();
                }
                b',' => {
                    if let Some(Frame::Arr(n)) = stack.last_mut() {
                        *n += 1;
                    }
                }
                b'-' | b'0'..=b'9' => {
                    let start = i;
                    while i < b.len()
                        && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                    {
                        i += 1;
                    }
                    let lit = &text[start..i];
                    // What serde_json keeps as an integer shows as written already.
                    let integer =
                        lit.parse::<u64>().is_ok() || (lit != "-0" && lit.parse::<i64>().is_ok());
                    if !integer {
                        out.insert(pointer(&stack), lit.to_string());
                    }
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        Literals(out)
    }

    /// The value at `pointer` as an error shows it: a number's literal as the text has it,
    /// anything else as JSON.
    fn show(&self, pointer: &str, v: &serde_json::Value) -> String {
        match (v, self.0.get(pointer)) {
            (serde_json::Value::Number(_), Some(lit)) => lit.clone(),
            _ => v.to_string(),
        }
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

    /// A number serde_json reads as an f64 is shown as the text wrote it (2^64, not
    /// 1.8446744073709552e+19), found by its pointer through arrays, objects and keys
    /// with escapes; what serde_json keeps exactly shows as its JSON.
    #[test]
    fn numbers_are_shown_as_written() {
        let t = r#"{"tokens": [1, 18446744073709551616, -0, 2.50, 1E3],
            "a\"/~b": {"x": [[-18446744073709551617]]}, "s": "[9.0, \"7e1\"]", "n": -3}"#;
        let v = parse_unique(t).unwrap();
        let l = Literals::of(t);
        let show = |p: &str| l.show(p, v.pointer(p).unwrap());
        assert_eq!(show("/tokens/0"), "1");
        assert_eq!(show("/tokens/1"), "18446744073709551616");
        assert_eq!(show("/tokens/2"), "-0");
        assert_eq!(show("/tokens/3"), "2.50");
        assert_eq!(show("/tokens/4"), "1E3");
        assert_eq!(show("/a\"~1~0b/x/0/0"), "-18446744073709551617");
        assert_eq!(show("/s"), r#""[9.0, \"7e1\"]""#);
        assert_eq!(show("/n"), "-3");
        // What serde_json alone would have echoed.
        assert_eq!(v["tokens"][1].to_string(), "1.8446744073709552e+19");
        let top = Literals::of("18446744073709551616");
        assert_eq!(
            top.show("", &parse_unique("18446744073709551616").unwrap()),
            "18446744073709551616"
        );
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
