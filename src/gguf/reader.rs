//! The GGUF parser. Rule: every read goes through `Cursor::take`, which refuses to go past the
//! end of the buffer; every count is checked against a cap and against the bytes left before
//! anything is allocated for it; offsets combine with checked arithmetic only.

use super::{
    describe_value, shape_n_bytes, GgufError, GgufFile, TensorInfo, Value, ValueType,
    DEFAULT_ALIGNMENT, GGUF_MAGIC, MAX_ARRAY_LEN, MAX_DIMS, MAX_KEY_LEN, MAX_KV, MAX_NESTING_DEPTH,
    MAX_STRING_LEN, MAX_TENSORS, MAX_TENSOR_NAME_LEN, MAX_TOTAL_VALUES,
};
use crate::quant::GgmlType;
use std::collections::HashSet;
use std::sync::Arc;

/// The caps the parser enforces. Production always uses `DEFAULT` (the named consts in
/// `mod.rs`); tests lower individual caps to exercise them without building huge files.
#[derive(Clone, Debug)]
pub(super) struct Limits {
    pub max_key_len: u64,
    pub max_tensor_name_len: u64,
    pub max_string_len: u64,
    pub max_array_len: u64,
    pub max_nesting_depth: usize,
    pub max_total_values: u64,
    pub max_tensors: u64,
    pub max_kv: u64,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        max_key_len: MAX_KEY_LEN,
        max_tensor_name_len: MAX_TENSOR_NAME_LEN,
        max_string_len: MAX_STRING_LEN,
        max_array_len: MAX_ARRAY_LEN,
        max_nesting_depth: MAX_NESTING_DEPTH,
        max_total_values: MAX_TOTAL_VALUES,
        max_tensors: MAX_TENSORS,
        max_kv: MAX_KV,
    };
}

/// A read position in the file. Invariant: `pos <= b.len()`.
struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn remaining(&self) -> u64 {
        (self.b.len() - self.pos) as u64
    }

    fn truncated(&self, what: &'static str, context: &str, need: u64) -> GgufError {
        GgufError::Truncated {
            what,
            context: context.to_string(),
            offset: self.offset(),
            need,
            file_len: self.b.len() as u64,
        }
    }

    /// The next `n` bytes, or a `Truncated` error naming `what` of `context`.
    fn take(&mut self, n: u64, what: &'static str, context: &str) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(self.truncated(what, context, n));
        }
        // n <= remaining, which came from a usize, so the cast and the sum cannot overflow.
        let end = self.pos + n as usize;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn fixed<const N: usize>(
        &mut self,
        what: &'static str,
        context: &str,
    ) -> Result<[u8; N], GgufError> {
        let s = self.take(N as u64, what, context)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u8(&mut self, what: &'static str, context: &str) -> Result<u8, GgufError> {
        Ok(self.fixed::<1>(what, context)?[0])
    }

    fn u32(&mut self, what: &'static str, context: &str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.fixed(what, context)?))
    }

    fn u64(&mut self, what: &'static str, context: &str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.fixed(what, context)?))
    }

    /// A GGUF string: u64 byte length, then that many UTF-8 bytes (no terminator).
    fn string(
        &mut self,
        what: &'static str,
        context: &str,
        limit: u64,
    ) -> Result<String, GgufError> {
        let at = self.offset();
        let len = self.u64(what, context)?;
        // The cap is checked before the remaining bytes so the error names the cap, the more
        // useful fact, when a corrupt length is both absurd and past the end.
        if len > limit {
            return Err(GgufError::StringTooLong {
                what,
                context: context.to_string(),
                offset: at,
                len,
                limit,
            });
        }
        let body_at = self.offset();
        let raw = self.take(len, what, context)?;
        // Strict: GGUF strings are UTF-8 by spec. Lossy decoding would silently change token
        // bytes, which the tokenizer would then decode differently than the file says.
        match std::str::from_utf8(raw) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(GgufError::InvalidUtf8 {
                what,
                context: context.to_string(),
                offset: body_at,
            }),
        }
    }
}

/// Reads values while counting them against `max_total_values`.
struct ValueReader<'l> {
    limits: &'l Limits,
    n_values: u64,
}

impl ValueReader<'_> {
    /// One value of type `ty`; `depth` is the number of arrays enclosing it.
    fn read(
        &mut self,
        cur: &mut Cursor<'_>,
        ty: ValueType,
        key: &str,
        depth: usize,
    ) -> Result<Value, GgufError> {
        self.n_values += 1;
        if self.n_values > self.limits.max_total_values {
            return Err(GgufError::TooManyValues {
                key: key.to_string(),
                limit: self.limits.max_total_values,
            });
        }
        let what = "value";
        Ok(match ty {
            ValueType::U8 => Value::U8(cur.u8(what, key)?),
            ValueType::I8 => Value::I8(i8::from_le_bytes(cur.fixed(what, key)?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(cur.fixed(what, key)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(cur.fixed(what, key)?)),
            ValueType::U32 => Value::U32(cur.u32(what, key)?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(cur.fixed(what, key)?)),
            ValueType::U64 => Value::U64(cur.u64(what, key)?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(cur.fixed(what, key)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(cur.fixed(what, key)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(cur.fixed(what, key)?)),
            ValueType::Bool => {
                let at = cur.offset();
                // ggml reads any nonzero byte as true; gguf-py and ggml both write only 0/1, so
                // another byte means corruption and is refused rather than guessed at.
                match cur.u8(what, key)? {
                    0 => Value::Bool(false),
                    1 => Value::Bool(true),
                    byte => {
                        return Err(GgufError::InvalidBool {
                            key: key.to_string(),
                            offset: at,
                            byte,
                        })
                    }
                }
            }
            ValueType::String => {
                Value::String(cur.string("string value", key, self.limits.max_string_len)?)
            }
            ValueType::Array => self.read_array(cur, key, depth)?,
        })
    }

    fn read_array(
        &mut self,
        cur: &mut Cursor<'_>,
        key: &str,
        depth: usize,
    ) -> Result<Value, GgufError> {
        // The array being read sits at nesting level depth + 1.
        if depth >= self.limits.max_nesting_depth {
            return Err(GgufError::NestingTooDeep {
                key: key.to_string(),
                limit: self.limits.max_nesting_depth,
            });
        }
        let type_at = cur.offset();
        let type_id = cur.u32("array element type", key)?;
        let elem = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            key: key.to_string(),
            type_id,
            offset: type_at,
        })?;
        let len_at = cur.offset();
        let len = cur.u64("array length", key)?;
        if len > self.limits.max_array_len {
            return Err(GgufError::ArrayTooLong {
                key: key.to_string(),
                offset: len_at,
                len,
                limit: self.limits.max_array_len,
            });
        }
        // Refuse before allocating: every element takes at least min_encoded_len bytes.
        let need = len.saturating_mul(elem.min_encoded_len());
        if need > cur.remaining() {
            return Err(cur.truncated("array elements", key, need));
        }
        if self.n_values.saturating_add(len) > self.limits.max_total_values {
            return Err(GgufError::TooManyValues {
                key: key.to_string(),
                limit: self.limits.max_total_values,
            });
        }
        // len <= remaining bytes, so it fits in usize.
        let mut items = Vec::with_capacity(len as usize);
        for _ in 0..len {
            items.push(self.read(cur, elem, key, depth + 1)?);
        }
        Ok(Value::Array(elem, items))
    }
}

/// Everything parsed from the header; kept apart from `GgufFile` so the cursor's borrow of the
/// bytes ends before the bytes move into the `Arc`.
struct Header {
    version: u32,
    metadata: Vec<(String, Value)>,
    tensors: Vec<TensorInfo>,
    alignment: u64,
    data_offset: u64,
}

pub(super) fn parse(bytes: Vec<u8>, limits: &Limits) -> Result<GgufFile, GgufError> {
    let h = parse_header(&bytes, bytes.len() as u64, limits)?;
    Ok(GgufFile {
        version: h.version,
        metadata: h.metadata,
        tensors: h.tensors,
        alignment: h.alignment,
        data_offset: h.data_offset,
        bytes: Arc::new(bytes),
    })
}

/// A file's first bytes (`prefix`, of a file of `file_len` bytes) checked as its header, so
/// that `open` refuses a file whose header is wrong (an unsupported version, a count past
/// its limit, a tensor past the end of a truncated download) before reading all of it. A
/// header longer than the prefix decides nothing here: the whole file's parse does.
pub(super) fn check_prefix(prefix: &[u8], file_len: u64, limits: &Limits) -> Result<(), GgufError> {
    match parse_header(prefix, file_len, limits) {
        Err(GgufError::Truncated { .. }) if (prefix.len() as u64) < file_len => Ok(()),
        Err(e) => Err(e),
        Ok(_) => Ok(()),
    }
}

/// The header of `bytes`, the first bytes of a file of `file_len` bytes (all of them, but
/// for `check_prefix`): a tensor's data is checked against `file_len`.
fn parse_header(bytes: &[u8], file_len: u64, limits: &Limits) -> Result<Header, GgufError> {
    let mut cur = Cursor { b: bytes, pos: 0 };
    let hdr = "the header";

    let magic: [u8; 4] = cur.fixed("magic", hdr)?;
    if magic != GGUF_MAGIC {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = cur.u32("version", hdr)?;
    if version != 2 && version != 3 {
        // A big-endian file's version reads byte-swapped (3 -> 0x03000000); say so instead of
        // reporting a meaningless huge version.
        let swapped = version.swap_bytes();
        if (1..=3).contains(&swapped) {
            return Err(GgufError::BigEndian { version, swapped });
        }
        return Err(GgufError::UnsupportedVersion { version });
    }
    // v2 and v3 share one little-endian layout (v3 only added big-endian files); v1 used u32
    // counts and lengths and is refused above.
    let n_tensors = cur.u64("tensor count", hdr)?;
    if n_tensors > limits.max_tensors {
        return Err(GgufError::TooMany {
            what: "tensor",
            count: n_tensors,
            limit: limits.max_tensors,
        });
    }
    let n_kv = cur.u64("metadata pair count", hdr)?;
    if n_kv > limits.max_kv {
        return Err(GgufError::TooMany {
            what: "metadata pair",
            count: n_kv,
            limit: limits.max_kv,
        });
    }

    let mut values = ValueReader {
        limits,
        n_values: 0,
    };
    let mut metadata: Vec<(String, Value)> = Vec::new();
    let mut seen_keys: HashSet<String> = HashSet::new();
    for i in 0..n_kv {
        let context = format!("metadata pair #{i}");
        let key = cur.string("key", &context, limits.max_key_len)?;
        if !seen_keys.insert(key.clone()) {
            return Err(GgufError::DuplicateKey { key });
        }
        let type_at = cur.offset();
        let type_id = cur.u32("value type", &key)?;
        let ty = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            key: key.clone(),
            type_id,
            offset: type_at,
        })?;
        let value = values.read(&mut cur, ty, &key, 0)?;
        metadata.push((key, value));
    }

    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, v)) => match v.as_u64() {
            Some(a) if a.is_power_of_two() => a,
            _ => {
                return Err(GgufError::BadAlignment {
                    value: describe_value(v),
                })
            }
        },
    };

    let mut tensors: Vec<TensorInfo> = Vec::new();
    let mut seen_names: HashSet<String> = HashSet::new();
    for i in 0..n_tensors {
        let context = format!("tensor info #{i}");
        let name = cur.string("tensor name", &context, limits.max_tensor_name_len)?;
        if !seen_names.insert(name.clone()) {
            return Err(GgufError::DuplicateTensor { name });
        }
        let n_dims = cur.u32("dimension count", &name)?;
        // Checked before reading the dims so a corrupt count allocates nothing.
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(GgufError::BadDimCount {
                name,
                n_dims: n_dims.into(),
                limit: MAX_DIMS,
            });
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(cur.u64("dimension", &name)?);
        }
        let type_id = cur.u32("tensor type", &name)?;
        let offset = cur.u64("tensor data offset", &name)?;
        let ty = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
            name: name.clone(),
            type_id,
        })?;
        let n_bytes = shape_n_bytes(&name, &dims, ty)?;
        tensors.push(TensorInfo {
            name,
            dims,
            ty,
            offset,
            n_bytes,
        });
    }

    let header_end = cur.offset();
    let data_offset = header_end
        .checked_add(alignment - 1)
        .map(|x| x & !(alignment - 1))
        .ok_or(GgufError::DataOffsetOverflow {
            header_end,
            alignment,
        })?;

    for t in &tensors {
        if !t.offset.is_multiple_of(alignment) {
            return Err(GgufError::MisalignedOffset {
                name: t.name.clone(),
                offset: t.offset,
                alignment,
            });
        }
        let end = data_offset
            .checked_add(t.offset)
            .and_then(|start| start.checked_add(t.n_bytes));
        if end.is_none_or(|end| end > file_len) {
            return Err(GgufError::TensorPastEnd {
                name: t.name.clone(),
                offset: t.offset,
                n_bytes: t.n_bytes,
                data_offset,
                file_len,
            });
        }
    }

    check_no_overlap(&tensors)?;

    Ok(Header {
        version,
        metadata,
        tensors,
        alignment,
        data_offset,
    })
}

/// Two tensors sharing bytes would let a write through one weight view corrupt another, and
/// never happens in a well-formed file. Sort by start; each start must be at or past the
/// furthest end seen so far. Ends cannot overflow: the caller checked them against the file.
fn check_no_overlap(tensors: &[TensorInfo]) -> Result<(), GgufError> {
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| (tensors[i].offset, i));
    let mut furthest: Option<(usize, u64)> = None;
    for &i in &order {
        let t = &tensors[i];
        let end = t.offset + t.n_bytes;
        if let Some((j, prev_end)) = furthest {
            if t.offset < prev_end {
                let p = &tensors[j];
                return Err(GgufError::TensorsOverlap {
                    first: p.name.clone(),
                    first_range: p.offset..prev_end,
                    second: t.name.clone(),
                    second_range: t.offset..end,
                });
            }
        }
        if furthest.is_none_or(|(_, e)| end > e) {
            furthest = Some((i, end));
        }
    }
    Ok(())
}
