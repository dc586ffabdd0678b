//! The GGUF v3 writer. Rule: output depends only on what was added and in which order: keys
//! and tensors keep insertion order, tensor offsets are the running aligned sum, every pad byte
//! is zero, and nothing (time, paths, hash order) leaks in. `write` is atomic: a reader of
//! `path` sees the old file or the complete new one, never a partial one.

use super::{
    shape_n_bytes, GgufError, TensorInfo, Value, DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION,
    MAX_ARRAY_LEN, MAX_KEY_LEN, MAX_NESTING_DEPTH, MAX_STRING_LEN, MAX_TENSOR_NAME_LEN,
};
use crate::quant::GgmlType;
use std::path::Path;

/// Builds a GGUF v3 file in memory.
#[derive(Clone, Default)]
pub struct GgufWriter {
    pub(super) metadata: Vec<(String, Value)>,
    /// `offset` is unused here (recomputed by `to_bytes`); `n_bytes == data.len()`.
    pub(super) tensors: Vec<(TensorInfo, Vec<u8>)>,
}

impl std::fmt::Debug for GgufWriter {
    // Tensor data is left out: it can be hundreds of MiB.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufWriter")
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl GgufWriter {
    /// An empty file with the default alignment (32) and no `general.alignment` key.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `general.alignment` (as u32, the type ggml requires) and lays tensors out with it.
    /// Not validated here, so tests can build files with a zero or non-power-of-two alignment:
    /// the reader refuses those. Layout uses 32 when the value is 0.
    pub fn set_alignment(&mut self, a: u32) {
        self.add("general.alignment", Value::U32(a));
    }

    /// Adds a metadata pair. Keys keep first-insertion order; adding an existing key replaces
    /// its value in place (a GGUF file cannot hold a key twice).
    pub fn add(&mut self, key: &str, v: Value) {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some((_, slot)) => *slot = v,
            None => self.metadata.push((key.to_string(), v)),
        }
    }

    /// Adds a tensor after validating its name, shape and data length exactly as the reader
    /// would; errors name the tensor and the mismatching value.
    pub fn add_tensor(
        &mut self,
        name: &str,
        dims: &[u64],
        ty: GgmlType,
        data: Vec<u8>,
    ) -> Result<(), GgufError> {
        if name.len() as u64 > MAX_TENSOR_NAME_LEN {
            return Err(GgufError::StringTooLong {
                what: "tensor name",
                context: format!("tensor '{name}'"),
                offset: 0,
                len: name.len() as u64,
                limit: MAX_TENSOR_NAME_LEN,
            });
        }
        if self.tensors.iter().any(|(t, _)| t.name == name) {
            return Err(GgufError::DuplicateTensor {
                name: name.to_string(),
            });
        }
        let n_bytes = shape_n_bytes(name, dims, ty)?;
        if data.len() as u64 != n_bytes {
            return Err(GgufError::DataLenMismatch {
                name: name.to_string(),
                ty,
                dims: dims.to_vec(),
                expected: n_bytes,
                got: data.len() as u64,
            });
        }
        self.tensors.push((
            TensorInfo {
                name: name.to_string(),
                dims: dims.to_vec(),
                ty,
                offset: 0,
                n_bytes,
            },
            data,
        ));
        Ok(())
    }

    /// Checks the metadata against what the reader accepts: key and string lengths, array
    /// lengths and nesting, and every array element having the array's declared type (a
    /// mismatched element would be written under the wrong type tag). `write` calls this;
    /// callers of `to_bytes` who build arrays by hand should too.
    pub fn check(&self) -> Result<(), GgufError> {
        for (key, v) in &self.metadata {
            if key.len() as u64 > MAX_KEY_LEN {
                return Err(GgufError::StringTooLong {
                    what: "key",
                    context: format!("key '{}...'", key.chars().take(64).collect::<String>()),
                    offset: 0,
                    len: key.len() as u64,
                    limit: MAX_KEY_LEN,
                });
            }
            check_value(key, v, 0)?;
        }
        Ok(())
    }

    /// The layout alignment: `general.alignment` when it is a usable integer (1..=u32::MAX,
    /// matching ggml's u32 key), else the default.
    fn alignment(&self) -> usize {
        self.metadata
            .iter()
            .find(|(k, _)| k == "general.alignment")
            .and_then(|(_, v)| v.as_u64())
            .filter(|&a| a >= 1 && a <= u64::from(u32::MAX))
            .map_or(DEFAULT_ALIGNMENT as usize, |a| a as usize)
    }

    /// The complete file. Byte-identical for identical inputs.
    pub fn to_bytes(&self) -> Vec<u8> {
        let align = self.alignment();
        let mut out = Vec::new();
        out.extend_from_slice(&GGUF_MAGIC);
        put_u32(&mut out, GGUF_VERSION);
        put_u64(&mut out, self.tensors.len() as u64);
        put_u64(&mut out, self.metadata.len() as u64);
        for (key, v) in &self.metadata {
            put_string(&mut out, key);
            put_u32(&mut out, v.value_type().id());
            put_payload(&mut out, v);
        }
        // Offsets are the running sum of sizes, each rounded up to the alignment.
        let mut offset = 0usize;
        for (t, data) in &self.tensors {
            put_string(&mut out, &t.name);
            put_u32(&mut out, t.dims.len() as u32);
            for &d in &t.dims {
                put_u64(&mut out, d);
            }
            put_u32(&mut out, t.ty.id());
            put_u64(&mut out, offset as u64);
            offset += data.len() + pad_len(data.len(), align);
        }
        out.resize(out.len() + pad_len(out.len(), align), 0);
        for (_, data) in &self.tensors {
            out.extend_from_slice(data);
            // Padding after the last tensor too, as gguf-py does: the file length is then a
            // multiple of the alignment.
            out.resize(out.len() + pad_len(data.len(), align), 0);
        }
        out
    }

    /// Writes the file atomically: a temp file in the same directory (same filesystem, so the
    /// rename is atomic), flushed to disk, then renamed over `path`. On error the temp file is
    /// removed and `path` is untouched.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        self.check()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        crate::fsio::write_atomic(path, &self.to_bytes())
    }
}

fn check_value(key: &str, v: &Value, depth: usize) -> Result<(), GgufError> {
    match v {
        Value::String(s) if s.len() as u64 > MAX_STRING_LEN => Err(GgufError::StringTooLong {
            what: "string value",
            context: key.to_string(),
            offset: 0,
            len: s.len() as u64,
            limit: MAX_STRING_LEN,
        }),
        Value::Array(elem, items) => {
            if depth >= MAX_NESTING_DEPTH {
                return Err(GgufError::NestingTooDeep {
                    key: key.to_string(),
                    limit: MAX_NESTING_DEPTH,
                });
            }
            if items.len() as u64 > MAX_ARRAY_LEN {
                return Err(GgufError::ArrayTooLong {
                    key: key.to_string(),
                    offset: 0,
                    len: items.len() as u64,
                    limit: MAX_ARRAY_LEN,
                });
            }
            for (index, item) in items.iter().enumerate() {
                if item.value_type() != *elem {
                    return Err(GgufError::MixedArray {
                        key: key.to_string(),
                        declared: elem.name(),
                        index,
                        found: item.type_name(),
                    });
                }
                check_value(key, item, depth + 1)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Zero bytes needed after `len` bytes to reach a multiple of `align` (any align >= 1).
fn pad_len(len: usize, align: usize) -> usize {
    (align - len % align) % align
}

pub(super) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(super) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(super) fn put_string(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A value's bytes without its type tag (the tag precedes top-level values; array elements
/// share the array's element type).
pub(super) fn put_payload(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_string(out, s),
        Value::Array(elem, items) => {
            put_u32(out, elem.id());
            put_u64(out, items.len() as u64);
            for item in items {
                put_payload(out, item);
            }
        }
    }
}
