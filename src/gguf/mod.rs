//! GGUF container format: a bounded reader for versions 2 and 3 and a deterministic v3 writer.
//!
//! Rule that holds in this module: no byte sequence makes the reader panic, allocate without
//! bound, or hand out a tensor range outside the file. Every length read from the file is
//! checked against a named cap (below, each with where it comes from) and against the bytes
//! that remain before anything is allocated; every offset and size is combined with checked
//! arithmetic. Each error names the offending value (key, tensor name, offset, limit).
//!
//! The writer's rule: identical inputs give byte-identical output (keys in insertion order,
//! tensors in insertion order, zero padding), so synthetic models hash the same everywhere.
//!
//! Layout (little-endian throughout): magic `GGUF`, u32 version, u64 tensor count, u64 kv
//! count, the kv pairs, the tensor infos, zero padding to `general.alignment`, then the data
//! section, in which each tensor's offset is relative to the section start.

mod reader;
mod writer;

#[cfg(test)]
mod tests;

pub use writer::GgufWriter;

use crate::quant::GgmlType;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The four bytes every GGUF file starts with.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";

/// Version the writer emits (ggml's `GGUF_VERSION`).
pub const GGUF_VERSION: u32 = 3;

/// `general.alignment` when the key is absent (ggml's `GGUF_DEFAULT_ALIGNMENT`).
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Longest metadata key. The GGUF spec (ggml/docs/gguf.md, "key" caveats): "It must be at most
/// 2^16-1 bytes long".
pub const MAX_KEY_LEN: u64 = (1 << 16) - 1;

/// Longest tensor name. ggml's `GGML_MAX_NAME` is 64 including the NUL terminator, and
/// ggml/src/gguf.cpp rejects `name.length() >= GGML_MAX_NAME`, so 63 bytes.
pub const MAX_TENSOR_NAME_LEN: u64 = 63;

/// Longest string value. No format limit exists; the longest strings in real files are chat
/// templates (tens of KiB) and the occasional embedded `tokenizer.huggingface.json` (Gemma 3's
/// tokenizer.json is ~33 MiB). 256 MiB leaves ~8x headroom over that.
pub const MAX_STRING_LEN: u64 = 1 << 28;

/// Longest array. Largest real arrays are vocabularies: Gemma 3 has 262 144 tokens (and as many
/// scores and token types), Llama 3 has ~280k merges. 2^22 (4 194 304) is 16x Gemma's vocab.
pub const MAX_ARRAY_LEN: u64 = 1 << 22;

/// Most array nesting levels (an array of scalars is depth 1). ggml/src/gguf.cpp rejects any
/// array of arrays (depth 2); gguf-py can write them. 8 allows every shape seen in practice while
/// bounding the reader's recursion.
pub const MAX_NESTING_DEPTH: usize = 8;

/// Most metadata values in one file, counting every array element. Bounds memory (a `Value` is
/// 32 bytes, an encoded u8/bool element 1 byte). Gemma 3's three 262 144-entry vocab arrays are
/// ~0.8M values; 2^24 is ~20x that (at most ~512 MiB of `Value`s).
pub const MAX_TOTAL_VALUES: u64 = 1 << 24;

/// Most tensor dimensions: ggml's `GGML_MAX_DIMS`.
pub const MAX_DIMS: u32 = 4;

/// Most tensors. Even the largest real models have a few thousand at most (Llama 3.1 405B:
/// 126 layers x 9 + 4 = 1 138; MoE models merge experts into 3-D tensors); 2^16 is far above.
pub const MAX_TENSORS: u64 = 1 << 16;

/// Most metadata pairs. Real files carry 20-60 (both models here: 33); 2^16 matches the tensor cap.
pub const MAX_KV: u64 = 1 << 16;

/// Errors from reading or writing GGUF. Every variant carries the value that was wrong.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The OS error is in the message and not a `source` too: an error chain printed
    /// whole (`{:#}`) would show it twice.
    #[error("cannot read GGUF file {path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    /// A device, FIFO, socket or directory: the reader takes a file whole, so it needs one
    /// of known size (reading /dev/zero would never end, a FIFO might block for ever).
    #[error("GGUF file {path} is {kind}, not a regular file (a model file is read whole)")]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error("file truncated: {what} of {context} needs {need} bytes at offset {offset}, but the file is {file_len} bytes")]
    Truncated {
        what: &'static str,
        context: String,
        offset: u64,
        need: u64,
        file_len: u64,
    },
    #[error("bad magic {found:02x?} (expected \"GGUF\" = [47, 47, 55, 46]): not a GGUF file")]
    BadMagic { found: [u8; 4] },
    #[error("GGUF version {version} is not supported (this reader handles versions 2 and 3)")]
    UnsupportedVersion { version: u32 },
    #[error("GGUF version field reads {version:#010x}: a big-endian GGUF file (version {swapped}), which is not supported")]
    BigEndian { version: u32, swapped: u32 },
    #[error("{what} count {count} exceeds the limit {limit}")]
    TooMany {
        what: &'static str,
        count: u64,
        limit: u64,
    },
    #[error("{what} of {context} at offset {offset} is {len} bytes, over the limit {limit}")]
    StringTooLong {
        what: &'static str,
        context: String,
        offset: u64,
        len: u64,
        limit: u64,
    },
    #[error("{what} of {context} at offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        what: &'static str,
        context: String,
        offset: u64,
    },
    #[error("array in key '{key}' at offset {offset} has {len} elements, over the limit {limit}")]
    ArrayTooLong {
        key: String,
        offset: u64,
        len: u64,
        limit: u64,
    },
    #[error(
        "metadata holds more than {limit} values (counting array elements); key '{key}' goes over"
    )]
    TooManyValues { key: String, limit: u64 },
    #[error("unknown GGUF value type {type_id} for key '{key}' at offset {offset}")]
    UnknownValueType {
        key: String,
        type_id: u32,
        offset: u64,
    },
    #[error("arrays in key '{key}' nest deeper than the limit {limit}")]
    NestingTooDeep { key: String, limit: usize },
    #[error("bool in key '{key}' at offset {offset} is byte {byte:#04x}, not 0 or 1")]
    InvalidBool { key: String, offset: u64, byte: u8 },
    #[error("duplicate metadata key '{key}'")]
    DuplicateKey { key: String },
    #[error("general.alignment is {value}: it must be a nonzero power-of-two integer")]
    BadAlignment { value: String },
    #[error("duplicate tensor name '{name}'")]
    DuplicateTensor { name: String },
    #[error("tensor '{name}' has {n_dims} dimensions; 1 to {limit} are allowed")]
    BadDimCount {
        name: String,
        n_dims: u64,
        limit: u32,
    },
    #[error("tensor '{name}' has a zero dimension in shape {dims:?}")]
    ZeroDim { name: String, dims: Vec<u64> },
    #[error("unknown tensor type id {type_id} for tensor '{name}'")]
    UnknownTensorType { name: String, type_id: u32 },
    #[error("tensor '{name}' shape {dims:?} of type {ty}: element or byte count overflows")]
    ShapeOverflow {
        name: String,
        dims: Vec<u64>,
        ty: GgmlType,
    },
    #[error("tensor '{name}' of type {ty}: row length {row_len} is not a multiple of the block length {block_len}")]
    RowNotWholeBlocks {
        name: String,
        ty: GgmlType,
        row_len: u64,
        block_len: u64,
    },
    #[error("tensor '{name}' data offset {offset} is not a multiple of the alignment {alignment}")]
    MisalignedOffset {
        name: String,
        offset: u64,
        alignment: u64,
    },
    #[error("data section would start at {header_end} rounded up to alignment {alignment}, which overflows")]
    DataOffsetOverflow { header_end: u64, alignment: u64 },
    #[error("tensor '{name}' data (offset {offset} + {n_bytes} bytes from data section start {data_offset}) runs past the end of the file ({file_len} bytes)")]
    TensorPastEnd {
        name: String,
        offset: u64,
        n_bytes: u64,
        data_offset: u64,
        file_len: u64,
    },
    #[error(
        "tensors '{first}' (bytes {first_range:?}) and '{second}' (bytes {second_range:?}) overlap"
    )]
    TensorsOverlap {
        first: String,
        first_range: Range<u64>,
        second: String,
        second_range: Range<u64>,
    },
    #[error("tensor '{name}' of type {ty} and shape {dims:?} needs {expected} bytes, got {got}")]
    DataLenMismatch {
        name: String,
        ty: GgmlType,
        dims: Vec<u64>,
        expected: u64,
        got: u64,
    },
    #[error("array in key '{key}' is declared {declared} but element {index} is {found}")]
    MixedArray {
        key: String,
        declared: &'static str,
        index: usize,
        found: &'static str,
    },
    #[error("metadata key '{key}' is missing")]
    MissingKey { key: String },
    #[error("metadata key '{key}' is {found}, expected {expected}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: String,
    },
}

/// A metadata value type as GGUF numbers it (`gguf_type` in gguf.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    pub const ALL: [ValueType; 13] = [
        ValueType::U8,
        ValueType::I8,
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::F32,
        ValueType::Bool,
        ValueType::String,
        ValueType::Array,
        ValueType::U64,
        ValueType::I64,
        ValueType::F64,
    ];

    /// The on-disk type id.
    pub fn id(self) -> u32 {
        match self {
            ValueType::U8 => 0,
            ValueType::I8 => 1,
            ValueType::U16 => 2,
            ValueType::I16 => 3,
            ValueType::U32 => 4,
            ValueType::I32 => 5,
            ValueType::F32 => 6,
            ValueType::Bool => 7,
            ValueType::String => 8,
            ValueType::Array => 9,
            ValueType::U64 => 10,
            ValueType::I64 => 11,
            ValueType::F64 => 12,
        }
    }

    pub fn from_id(id: u32) -> Option<ValueType> {
        ValueType::ALL.into_iter().find(|t| t.id() == id)
    }

    /// Lower-case name used in error messages ("u32", "string", "array", ...).
    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::String => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }

    /// Fewest bytes one value of this type occupies on disk: lets the reader refuse an array
    /// whose declared length cannot fit in the remaining bytes before allocating for it.
    fn min_encoded_len(self) -> u64 {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 => 8,
            ValueType::String => 8, // u64 length
            ValueType::Array => 12, // u32 element type + u64 length
        }
    }
}

impl std::fmt::Display for ValueType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value. `Array` carries its declared element type so empty arrays round-trip.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(ValueType, Vec<Value>),
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F32(_) => ValueType::F32,
            Value::F64(_) => ValueType::F64,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(..) => ValueType::Array,
        }
    }

    /// Any integer type holding a non-negative value.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer type whose value fits in i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => i64::try_from(v).ok(),
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            _ => None,
        }
    }

    /// F32 as is; F64 and integers converted (rounded to nearest f32).
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            Value::U8(v) => Some(v.into()),
            Value::I8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::U32(v) => Some(v as f32),
            Value::I32(v) => Some(v as f32),
            Value::U64(v) => Some(v as f32),
            Value::I64(v) => Some(v as f32),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(_, v) => Some(v),
            _ => None,
        }
    }

    pub fn type_name(&self) -> &'static str {
        self.value_type().name()
    }
}

/// One tensor's header entry. `n_bytes` is derived from `dims` and `ty` at parse time.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `dims[0]` is the row length (contiguous), `dims[1]` the row count, ...
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Relative to the data section start (`GgufFile::data_offset`).
    pub offset: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Product of `dims`. The reader guarantees it does not overflow; for a hand-built
    /// `TensorInfo` an overflowing product saturates at `u64::MAX` instead of panicking.
    pub fn n_elements(&self) -> u64 {
        self.dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .unwrap_or(u64::MAX)
    }
}

/// A parsed GGUF file. Holds the whole file; tensor data is sliced out of it on demand, and the
/// `Arc` lets weight views share the bytes without copying.
#[derive(Clone)]
pub struct GgufFile {
    pub version: u32,
    /// In file order.
    pub metadata: Vec<(String, Value)>,
    /// In file order.
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Absolute offset of the data section in the file.
    pub data_offset: u64,
    bytes: Arc<Vec<u8>>,
}

impl std::fmt::Debug for GgufFile {
    // The file bytes are left out: hundreds of MiB are no use in a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.version)
            .field("n_metadata", &self.metadata.len())
            .field("n_tensors", &self.tensors.len())
            .field("alignment", &self.alignment)
            .field("data_offset", &self.data_offset)
            .field("file_len", &self.bytes.len())
            .finish()
    }
}

/// Bytes `GgufFile::open` reads first, to check the header before the whole file: the real
/// models' headers (tokenizer and all) are a few MB; a longer header is checked by the whole
/// read.
const HEADER_PROBE: u64 = 32 << 20;

impl GgufFile {
    /// Reads the whole file into memory (no mmap: mapping a file needs `unsafe`) and parses it.
    /// Only a regular file (a link to one too): anything else is refused before a read, and
    /// one whose header (in its first HEADER_PROBE bytes) is wrong before the whole read.
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        let io = |err| GgufError::Io {
            path: path.to_path_buf(),
            err,
        };
        let md = std::fs::metadata(path).map_err(io)?;
        if !md.is_file() {
            return Err(GgufError::NotAFile {
                path: path.to_path_buf(),
                kind: crate::fsio::file_kind(&md),
            });
        }
        // The header first: a file that is no GGUF, or whose header is wrong (a version this
        // reader does not take, a tensor past the end of a truncated download), is refused
        // from its first bytes, not after reading all of it (a 20 GB file of zeros took 15 s
        // and 4 GB of memory to say "bad magic"). HEADER_PROBE holds a real model's header.
        // The rest is read on from where the probe stopped, into the same buffer.
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(io)?;
        let mut bytes = Vec::new();
        (&mut f)
            .take(HEADER_PROBE)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        reader::check_prefix(&bytes, md.len(), &reader::Limits::DEFAULT)?;
        // As fs::read does: the whole length at once, a failed allocation an error.
        let rest =
            usize::try_from(md.len().saturating_sub(bytes.len() as u64)).unwrap_or(usize::MAX);
        bytes
            .try_reserve_exact(rest)
            .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::OutOfMemory, e)))?;
        f.read_to_end(&mut bytes).map_err(io)?;
        GgufFile::parse(bytes)
    }

    /// Parses a complete GGUF file held in memory.
    pub fn parse(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        reader::parse(bytes, &reader::Limits::DEFAULT)
    }

    /// First value stored under `key` (the reader rejects duplicates, so the only one).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The tensor's bytes. For a `TensorInfo` that does not describe a range inside this file
    /// (one not produced by this parse), returns an empty slice rather than panicking.
    pub fn tensor_bytes(&self, t: &TensorInfo) -> &[u8] {
        &self.bytes[self.tensor_range(t)]
    }

    /// Absolute byte range of the tensor's data in `bytes()`. Empty (`0..0`) when `t` does not
    /// describe a range inside this file; never the case for tensors from this parse.
    pub fn tensor_range(&self, t: &TensorInfo) -> Range<usize> {
        let range = (|| {
            let start = self.data_offset.checked_add(t.offset)?;
            let end = start.checked_add(t.n_bytes)?;
            let start = usize::try_from(start).ok()?;
            let end = usize::try_from(end).ok()?;
            (end <= self.bytes.len()).then_some(start..end)
        })();
        range.unwrap_or(0..0)
    }

    /// The whole file, shared with weight views.
    pub fn bytes(&self) -> &Arc<Vec<u8>> {
        &self.bytes
    }

    /// `key` as a non-negative integer (any integer type); errors name a missing or mistyped key.
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        let v = self.require(key)?;
        v.as_u64()
            .ok_or_else(|| wrong_type(key, "a non-negative integer", v))
    }

    /// `key` as f32 (f32, f64 or an integer); errors name a missing or mistyped key.
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        let v = self.require(key)?;
        v.as_f32().ok_or_else(|| wrong_type(key, "a number", v))
    }

    /// `key` as a string; errors name a missing or mistyped key.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        let v = self.require(key)?;
        v.as_str().ok_or_else(|| wrong_type(key, "a string", v))
    }

    /// `key` as a bool; errors name a missing or mistyped key.
    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        let v = self.require(key)?;
        v.as_bool().ok_or_else(|| wrong_type(key, "a bool", v))
    }

    /// `key` as an array's elements; errors name a missing or mistyped key.
    pub fn get_array(&self, key: &str) -> Result<&[Value], GgufError> {
        let v = self.require(key)?;
        v.as_array().ok_or_else(|| wrong_type(key, "an array", v))
    }

    fn require(&self, key: &str) -> Result<&Value, GgufError> {
        self.get(key).ok_or_else(|| GgufError::MissingKey {
            key: key.to_string(),
        })
    }
}

fn wrong_type(key: &str, expected: &'static str, v: &Value) -> GgufError {
    GgufError::WrongType {
        key: key.to_string(),
        expected,
        found: describe_value(v),
    }
}

/// A short description of a value for error messages: arrays by length and element type and
/// strings cut to 64 characters, so one message never embeds a whole vocabulary.
fn describe_value(v: &Value) -> String {
    match v {
        Value::Array(et, items) => format!("an array of {} {et}", items.len()),
        Value::String(s) => {
            let head: String = s.chars().take(64).collect();
            let more = if head.len() < s.len() { "..." } else { "" };
            format!("string {head:?}{more}")
        }
        Value::U8(x) => format!("u8 {x}"),
        Value::I8(x) => format!("i8 {x}"),
        Value::U16(x) => format!("u16 {x}"),
        Value::I16(x) => format!("i16 {x}"),
        Value::U32(x) => format!("u32 {x}"),
        Value::I32(x) => format!("i32 {x}"),
        Value::U64(x) => format!("u64 {x}"),
        Value::I64(x) => format!("i64 {x}"),
        Value::F32(x) => format!("f32 {x}"),
        Value::F64(x) => format!("f64 {x}"),
        Value::Bool(x) => format!("bool {x}"),
    }
}

/// Validates a tensor shape for `ty` and returns its byte size. Shared by reader and writer so
/// both accept exactly the same shapes: 1..=MAX_DIMS dims, none zero, the element count
/// representable in i64 (ggml stores dims as int64 and rejects larger totals), the row length
/// a whole number of blocks, and the byte count without overflow.
fn shape_n_bytes(name: &str, dims: &[u64], ty: GgmlType) -> Result<u64, GgufError> {
    if dims.is_empty() || dims.len() > MAX_DIMS as usize {
        return Err(GgufError::BadDimCount {
            name: name.to_string(),
            n_dims: dims.len() as u64,
            limit: MAX_DIMS,
        });
    }
    // Zero-sized tensors are legal in ggml but no model weight has one, and an empty range would
    // make "which tensor owns this byte" ambiguous in the overlap check; a zero is corruption.
    if dims.contains(&0) {
        return Err(GgufError::ZeroDim {
            name: name.to_string(),
            dims: dims.to_vec(),
        });
    }
    let overflow = || GgufError::ShapeOverflow {
        name: name.to_string(),
        dims: dims.to_vec(),
        ty,
    };
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(overflow)?;
    if n_elements > i64::MAX as u64 {
        return Err(overflow());
    }
    let block_len = ty.block_len() as u64;
    let row_len = dims[0];
    if !row_len.is_multiple_of(block_len) {
        return Err(GgufError::RowNotWholeBlocks {
            name: name.to_string(),
            ty,
            row_len,
            block_len,
        });
    }
    let row_bytes = ty.row_bytes(row_len).ok_or_else(overflow)?;
    dims[1..]
        .iter()
        .try_fold(row_bytes, |acc, &d| acc.checked_mul(d))
        .ok_or_else(overflow)
}
