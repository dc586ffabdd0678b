//! Token ids to text (decode only; the gate never tokenizes — tapes are token ids).
//!
//! Rule that holds here: decoding never fails and never panics. Pieces are joined as bytes
//! first and converted to text once at the end (lossily), so a character split across
//! byte-level tokens comes out whole; an id past the vocabulary decodes to U+FFFD.

use crate::gguf::{GgufFile, Value};

use super::ModelError;

/// How token strings encode bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VocabKind {
    /// `tokenizer.ggml.model = "gpt2"`: byte-level BPE, every byte drawn as one printable
    /// code point (GPT-2's `bytes_to_unicode` alphabet).
    Gpt2,
    /// `tokenizer.ggml.model = "llama"`: SentencePiece, `▁` for a space, `<0xNN>` byte tokens.
    SentencePiece,
}

// GGUF token types (llama.cpp `llama_token_type`).
const TYPE_NORMAL: i32 = 1;
const TYPE_BYTE: i32 = 6;

#[derive(Clone)]
pub struct Vocab {
    pub kind: VocabKind,
    tokens: Vec<String>,
    types: Vec<i32>,
    bos: Option<u32>,
    eos: Option<u32>,
    /// `tokenizer.ggml.add_bos_token` (false when absent).
    pub add_bos: bool,
}

// By hand: the derived form would print every token string (262144 for gemma3).
impl std::fmt::Debug for Vocab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocab")
            .field("kind", &self.kind)
            .field("len", &self.tokens.len())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("add_bos", &self.add_bos)
            .finish()
    }
}

/// GPT-2's `bytes_to_unicode` inverse: code point -> byte. Printable Latin-1 bytes stand for
/// themselves; the other 68 bytes are drawn as U+0100.. in byte order.
fn gpt2_char_to_byte(c: char) -> Option<u8> {
    let printable =
        |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let cp = c as u32;
    if printable(cp) {
        return Some(cp as u8);
    }
    if cp < 256 {
        return None;
    }
    let n = (cp - 256) as usize;
    (0u32..256)
        .filter(|&b| !printable(b))
        .nth(n)
        .map(|b| b as u8)
}

impl Vocab {
    pub fn from_gguf(f: &GgufFile) -> Result<Vocab, ModelError> {
        let key = "tokenizer.ggml.model";
        let model = f
            .get(key)
            .ok_or_else(|| ModelError::MissingKey { key: key.into() })?;
        let model = model.as_str().ok_or_else(|| ModelError::KeyType {
            key: key.into(),
            expected: "string",
            found: model.type_name().into(),
        })?;
        let kind = match model {
            "gpt2" => VocabKind::Gpt2,
            "llama" => VocabKind::SentencePiece,
            other => {
                return Err(ModelError::KeyValue {
                    key: key.into(),
                    value: format!("{other:?}"),
                    why: "unsupported tokenizer (supported: gpt2, llama)".into(),
                })
            }
        };
        let key = "tokenizer.ggml.tokens";
        let arr = array(f, key)?;
        let mut tokens = Vec::with_capacity(arr.len());
        for v in arr {
            let s = v.as_str().ok_or_else(|| ModelError::KeyType {
                key: key.into(),
                expected: "array of string",
                found: v.type_name().into(),
            })?;
            tokens.push(s.to_string());
        }
        let key = "tokenizer.ggml.token_type";
        let types = match f.get(key) {
            None => vec![TYPE_NORMAL; tokens.len()],
            Some(_) => {
                let arr = array(f, key)?;
                let mut t = Vec::with_capacity(arr.len());
                for v in arr {
                    let x = v.as_i64().ok_or_else(|| ModelError::KeyType {
                        key: key.into(),
                        expected: "array of integer",
                        found: v.type_name().into(),
                    })?;
                    t.push(x as i32);
                }
                if t.len() != tokens.len() {
                    return Err(ModelError::KeyValue {
                        key: key.into(),
                        value: format!("{} entries", t.len()),
                        why: format!("tokenizer.ggml.tokens has {}", tokens.len()),
                    });
                }
                t
            }
        };
        let id = |key: &str| -> Result<Option<u32>, ModelError> {
            match f.get(key) {
                None => Ok(None),
                Some(v) => match v.as_u64() {
                    Some(x) if (x as usize) < tokens.len() => Ok(Some(x as u32)),
                    _ => Err(ModelError::KeyValue {
                        key: key.into(),
                        value: format!("{v:?}"),
                        why: format!("not a token id below {}", tokens.len()),
                    }),
                },
            }
        };
        let bos = id("tokenizer.ggml.bos_token_id")?;
        let eos = id("tokenizer.ggml.eos_token_id")?;
        let add_bos = f
            .get("tokenizer.ggml.add_bos_token")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        Ok(Vocab {
            kind,
            tokens,
            types,
            bos,
            eos,
            add_bos,
        })
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }
    /// The token's string exactly as the file stores it.
    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(|s| s.as_str())
    }

    /// The bytes one token stands for. Control and user-defined tokens come out as their
    /// literal text (as HF `decode(skip_special_tokens=False)` shows them).
    fn piece(&self, id: u32, out: &mut Vec<u8>) {
        let Some(s) = self.tokens.get(id as usize) else {
            out.extend_from_slice("\u{FFFD}".as_bytes());
            return;
        };
        let ty = self.types.get(id as usize).copied().unwrap_or(TYPE_NORMAL);
        match self.kind {
            VocabKind::Gpt2 if ty == TYPE_NORMAL => {
                for c in s.chars() {
                    match gpt2_char_to_byte(c) {
                        Some(b) => out.push(b),
                        None => out.extend_from_slice(c.to_string().as_bytes()),
                    }
                }
            }
            VocabKind::Gpt2 => out.extend_from_slice(s.as_bytes()),
            VocabKind::SentencePiece if ty == TYPE_BYTE => match parse_byte_token(s) {
                Some(b) => out.push(b),
                None => out.extend_from_slice(s.as_bytes()),
            },
            VocabKind::SentencePiece => {
                out.extend_from_slice(s.replace('\u{2581}', " ").as_bytes())
            }
        }
    }

    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            self.piece(id, &mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// `<0xNN>` -> NN.
fn parse_byte_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

fn array<'a>(f: &'a GgufFile, key: &str) -> Result<&'a [Value], ModelError> {
    let v = f
        .get(key)
        .ok_or_else(|| ModelError::MissingKey { key: key.into() })?;
    v.as_array().ok_or_else(|| ModelError::KeyType {
        key: key.into(),
        expected: "array",
        found: v.type_name().into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GPT-2's `bytes_to_unicode`, written out as the reference implementation states it.
    fn bytes_to_unicode() -> Vec<(u8, char)> {
        let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
            .chain(0xA1..=0xAC)
            .chain(0xAE..=0xFF)
            .collect();
        let mut cs = bs.clone();
        let mut n = 0;
        for b in 0..256u32 {
            if !bs.contains(&b) {
                bs.push(b);
                cs.push(256 + n);
                n += 1;
            }
        }
        bs.iter()
            .zip(&cs)
            .map(|(&b, &c)| (b as u8, char::from_u32(c).unwrap_or('?')))
            .collect()
    }

    #[test]
    fn gpt2_alphabet_inverse_maps_every_code_point_back_to_its_byte() {
        let table = bytes_to_unicode();
        assert_eq!(table.len(), 256);
        for (b, c) in table {
            assert_eq!(gpt2_char_to_byte(c), Some(b), "byte {b} drawn as {c:?}");
        }
        assert_eq!(gpt2_char_to_byte('\u{1000}'), None);
    }

    fn vocab(kind: VocabKind, toks: &[(&str, i32)]) -> Vocab {
        Vocab {
            kind,
            tokens: toks.iter().map(|t| t.0.to_string()).collect(),
            types: toks.iter().map(|t| t.1).collect(),
            bos: None,
            eos: None,
            add_bos: false,
        }
    }

    #[test]
    fn gpt2_decode_turns_g_dot_into_space_and_joins_split_utf8() {
        // "Ġ" is byte 0x20; "Ã" + "©" are the bytes C3 A9 of "é".
        let v = vocab(
            VocabKind::Gpt2,
            &[
                ("Hello", 1),
                ("Ġworld", 1),
                ("Ã", 1),
                ("©", 1),
                ("<|im_end|>", 3),
                ("Ċ", 1),
            ],
        );
        assert_eq!(
            v.decode(&[0, 1, 2, 3, 5, 4]),
            "Hello world\u{e9}\n<|im_end|>"
        );
        assert_eq!(v.decode(&[99]), "\u{FFFD}");
    }

    #[test]
    fn sentencepiece_decode_maps_lower_one_eighth_block_and_byte_tokens() {
        let v = vocab(
            VocabKind::SentencePiece,
            &[
                ("<bos>", 3),
                ("\u{2581}The", 1),
                ("\u{2581}cap", 1),
                ("ital", 1),
                ("<0x0A>", 6),
                ("<0xC3>", 6),
                ("<0xA9>", 6),
            ],
        );
        assert_eq!(
            v.decode(&[0, 1, 2, 3, 4, 5, 6]),
            "<bos> The capital\n\u{e9}"
        );
    }
}
