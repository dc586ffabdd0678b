//! Tests for the GGUF reader and writer. Malformed files are built in memory, either by the
//! writer and then patched, or byte by byte with `Raw`, so each test shows exactly which field
//! is wrong. Expected values for the real model files come from gguf-py's `GGUFReader` (an
//! independent implementation), not from this reader.

use super::reader::{self, Limits};
use super::writer::{put_payload, put_string, put_u32, put_u64};
use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Hand-built GGUF bytes, field by field.
struct Raw(Vec<u8>);

impl Raw {
    fn new(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        let mut b = b"GGUF".to_vec();
        put_u32(&mut b, version);
        put_u64(&mut b, n_tensors);
        put_u64(&mut b, n_kv);
        Raw(b)
    }

    /// A kv pair with an arbitrary type id and payload bytes.
    fn kv_raw(mut self, key: &str, type_id: u32, payload: &[u8]) -> Raw {
        put_string(&mut self.0, key);
        put_u32(&mut self.0, type_id);
        self.0.extend_from_slice(payload);
        self
    }

    fn kv(self, key: &str, v: &Value) -> Raw {
        let mut payload = Vec::new();
        put_payload(&mut payload, v);
        self.kv_raw(key, v.value_type().id(), &payload)
    }

    fn tensor(mut self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> Raw {
        put_string(&mut self.0, name);
        put_u32(&mut self.0, dims.len() as u32);
        for &d in dims {
            put_u64(&mut self.0, d);
        }
        put_u32(&mut self.0, type_id);
        put_u64(&mut self.0, offset);
        self
    }

    fn pad(mut self, align: usize) -> Raw {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self
    }

    fn data(mut self, n: usize) -> Raw {
        self.0.extend((0..n).map(|i| (i * 7 + 1) as u8));
        self
    }

    fn parse(self) -> Result<GgufFile, GgufError> {
        GgufFile::parse(self.0)
    }
}

fn err(r: Result<GgufFile, GgufError>) -> GgufError {
    match r {
        Ok(f) => panic!("expected an error, parsed {f:?}"),
        Err(e) => e,
    }
}

/// Deterministic filler bytes for tensor data (the reader never interprets them).
fn filler(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn n_bytes(ty: GgmlType, dims: &[u64]) -> usize {
    shape_n_bytes("t", dims, ty).unwrap() as usize
}

/// Every value type, nested arrays, and tensors of several block formats with sizes that are
/// not multiples of the alignment (so padding is exercised).
fn sample_writer() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.add("general.architecture", Value::String("llama".into()));
    w.add("t.u8", Value::U8(200));
    w.add("t.i8", Value::I8(-100));
    w.add("t.u16", Value::U16(60000));
    w.add("t.i16", Value::I16(-30000));
    w.add("t.u32", Value::U32(4_000_000_000));
    w.add("t.i32", Value::I32(-2_000_000_000));
    w.add("t.u64", Value::U64(u64::MAX));
    w.add("t.i64", Value::I64(i64::MIN));
    w.add("t.f32", Value::F32(-1.5e-7));
    w.add("t.f64", Value::F64(std::f64::consts::PI));
    w.add("t.bool", Value::Bool(true));
    w.add("t.str", Value::String("héllo ▁wörld".into()));
    w.add("t.empty_str", Value::String(String::new()));
    w.add(
        "t.arr_i32",
        Value::Array(ValueType::I32, vec![Value::I32(1), Value::I32(-2)]),
    );
    w.add("t.arr_empty", Value::Array(ValueType::F64, vec![]));
    w.add(
        "t.arr_nested",
        Value::Array(
            ValueType::Array,
            vec![
                Value::Array(ValueType::String, vec![Value::String("a".into())]),
                Value::Array(ValueType::String, vec![]),
            ],
        ),
    );
    for (name, ty, dims) in [
        ("a.f32", GgmlType::F32, vec![5u64]),
        ("b.q8_0", GgmlType::Q8_0, vec![64, 3]),
        ("c.q4_k", GgmlType::Q4K, vec![256, 2, 1]),
        ("d.f16", GgmlType::F16, vec![3, 1, 1, 1]),
    ] {
        let n = n_bytes(ty, &dims);
        w.add_tensor(name, &dims, ty, filler(n, name.len() as u8))
            .unwrap();
    }
    w
}

/// End of the last tensor's data: any prefix shorter than this must be rejected.
fn data_end(f: &GgufFile) -> usize {
    f.tensors
        .iter()
        .map(|t| f.tensor_range(t).end)
        .max()
        .unwrap_or(0)
}

// ---------------------------------------------------------------- round trips and acceptance

#[test]
fn round_trip_preserves_every_value_type_and_order() {
    let w = sample_writer();
    let f = GgufFile::parse(w.to_bytes()).unwrap();
    assert_eq!(f.version, 3);
    assert_eq!(f.metadata, w.metadata);
    // Floats bit-exact, not just ==.
    assert_eq!(
        f.get("t.f32").unwrap().as_f32().unwrap().to_bits(),
        (-1.5e-7f32).to_bits()
    );
    assert_eq!(f.alignment, DEFAULT_ALIGNMENT);
    assert!(f.get("general.alignment").is_none());
}

#[test]
fn round_trip_preserves_tensors_and_aligns_data() {
    let w = sample_writer();
    let f = GgufFile::parse(w.to_bytes()).unwrap();
    assert_eq!(f.tensors.len(), w.tensors.len());
    assert_eq!(f.data_offset % 32, 0);
    for ((wt, data), t) in w.tensors.iter().zip(&f.tensors) {
        assert_eq!(t.name, wt.name);
        assert_eq!(t.dims, wt.dims);
        assert_eq!(t.ty, wt.ty);
        assert_eq!(t.n_bytes, data.len() as u64);
        assert_eq!(t.offset % 32, 0, "{}", t.name);
        assert_eq!(f.tensor_bytes(t), &data[..], "{}", t.name);
        assert_eq!(f.tensor(&t.name).unwrap().offset, t.offset);
    }
    assert_eq!(f.bytes().len() % 32, 0, "file ends padded to the alignment");
}

#[test]
fn accepts_version_2() {
    let mut b = sample_writer().to_bytes();
    b[4..8].copy_from_slice(&2u32.to_le_bytes());
    let f = GgufFile::parse(b).unwrap();
    assert_eq!(f.version, 2);
    assert_eq!(f.metadata, sample_writer().metadata);
}

#[test]
fn accepts_nesting_at_the_limit() {
    let mut v = Value::U8(7);
    for _ in 0..MAX_NESTING_DEPTH {
        let et = v.value_type();
        v = Value::Array(et, vec![v]);
    }
    let mut w = GgufWriter::new();
    w.add("deep", v.clone());
    w.check().unwrap();
    let f = GgufFile::parse(w.to_bytes()).unwrap();
    assert_eq!(f.get("deep"), Some(&v));
}

#[test]
fn writer_output_is_byte_identical_for_identical_inputs() {
    let a = sample_writer().to_bytes();
    let b = sample_writer().to_bytes();
    assert_eq!(a, b);
    let dir = tempfile::tempdir().unwrap();
    let (p1, p2) = (dir.path().join("one.gguf"), dir.path().join("two.gguf"));
    sample_writer().write(&p1).unwrap();
    sample_writer().write(&p2).unwrap();
    assert_eq!(std::fs::read(&p1).unwrap(), a);
    assert_eq!(std::fs::read(&p2).unwrap(), a);
}

#[test]
fn writer_keeps_insertion_order_and_replaces_in_place() {
    let mut w = GgufWriter::new();
    w.add("z", Value::U32(1));
    w.add("a", Value::U32(2));
    w.add("m", Value::U32(3));
    w.add("z", Value::U32(9));
    let f = GgufFile::parse(w.to_bytes()).unwrap();
    let keys: Vec<&str> = f.metadata.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["z", "a", "m"]);
    assert_eq!(f.get("z"), Some(&Value::U32(9)));
}

#[test]
fn set_alignment_lays_out_tensors_with_it() {
    let mut w = sample_writer();
    w.set_alignment(64);
    let f = GgufFile::parse(w.to_bytes()).unwrap();
    assert_eq!(f.alignment, 64);
    assert_eq!(f.get("general.alignment"), Some(&Value::U32(64)));
    assert_eq!(f.data_offset % 64, 0);
    for t in &f.tensors {
        assert_eq!(t.offset % 64, 0, "{}", t.name);
    }
    assert_eq!(f.bytes().len() % 64, 0);
}

#[test]
fn accepts_offsets_aligned_to_a_smaller_custom_alignment() {
    // alignment 8: a tensor at data offset 8 is aligned (it would not be at the default 32).
    let f = Raw::new(3, 2, 1)
        .kv("general.alignment", &Value::U32(8))
        .tensor("a", &[2], 0, 0)
        .tensor("b", &[2], 0, 8)
        .pad(8)
        .data(16)
        .parse()
        .unwrap();
    assert_eq!(f.alignment, 8);
    assert_eq!(f.tensor("b").unwrap().offset, 8);
}

#[test]
fn write_is_atomic_and_leaves_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    std::fs::write(&path, b"old contents").unwrap();
    let w = sample_writer();
    w.write(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), w.to_bytes());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, [std::ffi::OsString::from("m.gguf")]);
    // A failing write (missing directory) leaves nothing behind and reports the error.
    let missing = dir.path().join("no_such_dir").join("m.gguf");
    assert!(w.write(&missing).is_err());
    assert!(!missing.exists());
}

#[test]
fn writer_check_rejects_mixed_array() {
    let mut w = GgufWriter::new();
    w.add(
        "mixed",
        Value::Array(
            ValueType::U32,
            vec![Value::U32(1), Value::String("x".into())],
        ),
    );
    match w.check() {
        Err(GgufError::MixedArray {
            key,
            declared,
            index,
            found,
        }) => {
            assert_eq!(
                (key.as_str(), declared, index, found),
                ("mixed", "u32", 1, "string")
            );
        }
        other => panic!("expected MixedArray, got {other:?}"),
    }
    let dir = tempfile::tempdir().unwrap();
    let e = w.write(&dir.path().join("x.gguf")).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("mixed"), "{e}");
}

#[test]
fn add_tensor_rejects_wrong_data_len_bad_shape_and_duplicates() {
    let mut w = GgufWriter::new();
    match w.add_tensor("w", &[32, 2], GgmlType::Q8_0, vec![0; 67]) {
        Err(GgufError::DataLenMismatch { expected, got, .. }) => {
            assert_eq!((expected, got), (68, 67))
        }
        other => panic!("expected DataLenMismatch, got {other:?}"),
    }
    assert!(matches!(
        w.add_tensor("w", &[33], GgmlType::Q8_0, vec![]),
        Err(GgufError::RowNotWholeBlocks { row_len: 33, .. })
    ));
    assert!(matches!(
        w.add_tensor("w", &[1, 1, 1, 1, 1], GgmlType::F32, vec![0; 4]),
        Err(GgufError::BadDimCount { n_dims: 5, .. })
    ));
    assert!(matches!(
        w.add_tensor(&"n".repeat(64), &[1], GgmlType::F32, vec![0; 4]),
        Err(GgufError::StringTooLong {
            len: 64,
            limit: 63,
            ..
        })
    ));
    w.add_tensor("w", &[32, 2], GgmlType::Q8_0, vec![0; 68])
        .unwrap();
    assert!(matches!(
        w.add_tensor("w", &[1], GgmlType::F32, vec![0; 4]),
        Err(GgufError::DuplicateTensor { name }) if name == "w"
    ));
}

#[test]
fn typed_getters_name_missing_and_mistyped_keys() {
    let f = GgufFile::parse(sample_writer().to_bytes()).unwrap();
    assert_eq!(f.get_u64("t.u32").unwrap(), 4_000_000_000);
    assert_eq!(f.get_str("general.architecture").unwrap(), "llama");
    assert!(f.get_bool("t.bool").unwrap());
    assert_eq!(f.get_array("t.arr_i32").unwrap().len(), 2);
    let e = f.get_u64("nope").unwrap_err();
    assert!(matches!(&e, GgufError::MissingKey { key } if key == "nope"));
    let e = f.get_u64("t.i8").unwrap_err();
    assert!(
        e.to_string().contains("t.i8") && e.to_string().contains("-100"),
        "{e}"
    );
    let e = f.get_f32("t.str").unwrap_err();
    assert!(e.to_string().contains("t.str"), "{e}");
}

#[test]
fn value_accessors_convert_as_documented() {
    assert_eq!(Value::I32(5).as_u64(), Some(5));
    assert_eq!(Value::I32(-5).as_u64(), None);
    assert_eq!(Value::U64(u64::MAX).as_i64(), None);
    assert_eq!(Value::I8(-3).as_i64(), Some(-3));
    assert_eq!(Value::U32(3).as_f32(), Some(3.0));
    assert_eq!(Value::F64(0.5).as_f32(), Some(0.5));
    assert_eq!(Value::Bool(true).as_u64(), None);
    assert_eq!(Value::String("x".into()).as_str(), Some("x"));
    assert_eq!(Value::Array(ValueType::U8, vec![]).type_name(), "array");
    for t in ValueType::ALL {
        assert_eq!(ValueType::from_id(t.id()), Some(t));
    }
    assert_eq!(ValueType::from_id(13), None);
}

#[test]
fn tensor_range_of_a_foreign_tensor_is_empty_not_a_panic() {
    let f = GgufFile::parse(sample_writer().to_bytes()).unwrap();
    let mut t = f.tensors[0].clone();
    t.offset = u64::MAX - 3;
    assert_eq!(f.tensor_range(&t), 0..0);
    assert!(f.tensor_bytes(&t).is_empty());
    t.offset = 0;
    t.n_bytes = f.bytes().len() as u64;
    assert_eq!(f.tensor_range(&t), 0..0);
}

// ---------------------------------------------------------------- one test per malformation

#[test]
fn rejects_bad_magic() {
    let mut b = sample_writer().to_bytes();
    b[0] = b'X';
    let e = err(GgufFile::parse(b));
    assert!(
        matches!(e, GgufError::BadMagic { found } if &found == b"XGUF"),
        "{e}"
    );
}

/// `open` refuses a file that is no GGUF, or whose header is wrong, from its first bytes: a
/// large sparse file is never read whole (its length is what the test would wait on).
#[cfg(unix)]
#[test]
fn open_refuses_a_wrong_header_before_reading_the_file() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("zeros.gguf");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(1 << 40).unwrap(); // 1 TiB, sparse: a whole read would fail or take hours
    let t = std::time::Instant::now();
    let e = err(GgufFile::open(&p));
    assert!(
        matches!(e, GgufError::BadMagic { found } if found == [0; 4]),
        "{e}"
    );
    assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
    // A header that opens right but is wrong (version 0): refused from the first bytes too.
    let mut f = std::fs::File::create(&p).unwrap();
    std::io::Write::write_all(&mut f, b"GGUF\0\0\0\0").unwrap();
    f.set_len(1 << 40).unwrap();
    let t = std::time::Instant::now();
    let e = err(GgufFile::open(&p));
    assert!(
        matches!(e, GgufError::UnsupportedVersion { version: 0 }),
        "{e}"
    );
    assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
    // A whole file read through the probe parses as `parse` does.
    std::fs::write(&p, sample_writer().to_bytes()).unwrap();
    assert!(GgufFile::open(&p).is_ok());
    // Files shorter than the magic still say what the parse says (truncated).
    std::fs::write(&p, b"GG").unwrap();
    assert!(matches!(
        err(GgufFile::open(&p)),
        GgufError::Truncated { .. }
    ));
}

#[test]
fn rejects_truncated_header() {
    let b = sample_writer().to_bytes()[..10].to_vec();
    match err(GgufFile::parse(b)) {
        GgufError::Truncated {
            what,
            offset,
            need,
            file_len,
            ..
        } => assert_eq!((what, offset, need, file_len), ("tensor count", 8, 8, 10)),
        e => panic!("expected Truncated, got {e}"),
    }
    assert!(matches!(
        err(GgufFile::parse(vec![])),
        GgufError::Truncated { what: "magic", .. }
    ));
}

#[test]
fn rejects_unknown_version() {
    for v in [0u32, 1, 4, 1000] {
        let e = err(Raw::new(v, 0, 0).parse());
        assert!(
            matches!(e, GgufError::UnsupportedVersion { version } if version == v),
            "{e}"
        );
        assert!(e.to_string().contains(&format!("version {v} ")), "{e}");
    }
}

#[test]
fn rejects_big_endian_file() {
    let mut b = Raw::new(3, 0, 0).0;
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    let e = err(GgufFile::parse(b));
    assert!(matches!(e, GgufError::BigEndian { swapped: 3, .. }), "{e}");
}

#[test]
fn rejects_unknown_value_type() {
    let e = err(Raw::new(3, 0, 1).kv_raw("k.x", 13, &[0; 8]).parse());
    // header 24 + key length 8 + key 3 bytes = offset 35.
    assert!(
        matches!(&e, GgufError::UnknownValueType { key, type_id: 13, offset: 35 } if key == "k.x"),
        "{e}"
    );
    // Unknown element type inside an array.
    let mut payload = 99u32.to_le_bytes().to_vec();
    payload.extend_from_slice(&1u64.to_le_bytes());
    payload.push(0);
    let e = err(Raw::new(3, 0, 1).kv_raw("k.arr", 9, &payload).parse());
    assert!(
        matches!(&e, GgufError::UnknownValueType { key, type_id: 99, .. } if key == "k.arr"),
        "{e}"
    );
}

#[test]
fn rejects_unknown_tensor_type() {
    // 4 (removed Q4_2) and 9 (Q8_1, not stored in files) are not in the type table.
    for id in [4u32, 9, 39, u32::MAX] {
        let e = err(Raw::new(3, 1, 0)
            .tensor("blk.0.w", &[32], id, 0)
            .pad(32)
            .data(64)
            .parse());
        assert!(
            matches!(&e, GgufError::UnknownTensorType { name, type_id } if name == "blk.0.w" && *type_id == id),
            "{e}"
        );
        assert!(e.to_string().contains("blk.0.w") && e.to_string().contains(&id.to_string()));
    }
}

#[test]
fn rejects_duplicate_key() {
    let e = err(Raw::new(3, 0, 2)
        .kv("a.b", &Value::U32(1))
        .kv("a.b", &Value::U32(2))
        .parse());
    assert!(
        matches!(&e, GgufError::DuplicateKey { key } if key == "a.b"),
        "{e}"
    );
}

#[test]
fn rejects_duplicate_tensor_name() {
    let e = err(Raw::new(3, 2, 0)
        .tensor("w", &[8], 0, 0)
        .tensor("w", &[8], 0, 32)
        .pad(32)
        .data(64)
        .parse());
    assert!(
        matches!(&e, GgufError::DuplicateTensor { name } if name == "w"),
        "{e}"
    );
}

#[test]
fn rejects_tensor_past_end() {
    let b = sample_writer().to_bytes();
    let f = GgufFile::parse(b.clone()).unwrap();
    let end = data_end(&f);
    let last = f
        .tensors
        .iter()
        .max_by_key(|t| t.offset)
        .unwrap()
        .name
        .clone();
    let e = err(GgufFile::parse(b[..end - 1].to_vec()));
    assert!(
        matches!(&e, GgufError::TensorPastEnd { name, file_len, .. } if *name == last && *file_len == end as u64 - 1),
        "{e}"
    );
    // An offset so large that data_offset + offset overflows u64.
    let e = err(Raw::new(3, 1, 0)
        .tensor("w", &[8], 0, u64::MAX - 31)
        .pad(32)
        .data(32)
        .parse());
    assert!(matches!(e, GgufError::TensorPastEnd { .. }), "{e}");
}

#[test]
fn rejects_misaligned_offset() {
    let e = err(Raw::new(3, 1, 0)
        .tensor("w", &[4], 0, 16)
        .pad(32)
        .data(64)
        .parse());
    assert!(
        matches!(&e, GgufError::MisalignedOffset { name, offset: 16, alignment: 32 } if name == "w"),
        "{e}"
    );
}

#[test]
fn rejects_overflowing_shape() {
    for dims in [
        vec![1u64 << 32, 1 << 32], // element count overflows u64
        vec![1u64 << 32, 1 << 31], // 2^63 elements: not representable in ggml's int64
        vec![1u64 << 62],          // 2^62 f32 elements = 2^64 bytes
    ] {
        let e = err(Raw::new(3, 1, 0).tensor("w", &dims, 0, 0).pad(32).parse());
        assert!(
            matches!(&e, GgufError::ShapeOverflow { name, dims: d, .. } if name == "w" && *d == dims),
            "{e}"
        );
    }
}

#[test]
fn rejects_row_not_whole_blocks() {
    // Q4_0 (id 2) packs 32 elements per block; a 33-element row is not whole blocks.
    let e = err(Raw::new(3, 1, 0)
        .tensor("w", &[33, 2], 2, 0)
        .pad(32)
        .data(96)
        .parse());
    assert!(
        matches!(&e, GgufError::RowNotWholeBlocks { name, row_len: 33, block_len: 32, .. } if name == "w"),
        "{e}"
    );
}

#[test]
fn rejects_zero_dim() {
    let e = err(Raw::new(3, 1, 0)
        .tensor("w", &[32, 0], 0, 0)
        .pad(32)
        .parse());
    assert!(
        matches!(&e, GgufError::ZeroDim { name, .. } if name == "w"),
        "{e}"
    );
}

#[test]
fn rejects_bad_dim_count() {
    for dims in [vec![], vec![1u64; 5]] {
        let e = err(Raw::new(3, 1, 0)
            .tensor("w", &dims, 0, 0)
            .pad(32)
            .data(32)
            .parse());
        assert!(
            matches!(&e, GgufError::BadDimCount { name, n_dims, limit: 4 } if name == "w" && *n_dims == dims.len() as u64),
            "{e}"
        );
    }
    // A huge n_dims is refused before any dims are read or allocated.
    let mut b = Raw::new(3, 1, 0).0;
    put_string(&mut b, "w");
    put_u32(&mut b, u32::MAX);
    assert!(matches!(
        err(GgufFile::parse(b)),
        GgufError::BadDimCount {
            n_dims: 4294967295,
            ..
        }
    ));
}

#[test]
fn rejects_overlapping_tensors() {
    // a: 16 f32 = bytes [0, 64); b: 8 f32 at 32 = bytes [32, 64).
    let e = err(Raw::new(3, 2, 0)
        .tensor("a", &[16], 0, 0)
        .tensor("b", &[8], 0, 32)
        .pad(32)
        .data(64)
        .parse());
    match e {
        GgufError::TensorsOverlap {
            first,
            first_range,
            second,
            second_range,
        } => {
            assert_eq!((first.as_str(), second.as_str()), ("a", "b"));
            assert_eq!((first_range, second_range), (0..64, 32..64));
        }
        e => panic!("expected TensorsOverlap, got {e}"),
    }
    // Same start offset.
    let e = err(Raw::new(3, 2, 0)
        .tensor("a", &[8], 0, 0)
        .tensor("b", &[8], 0, 0)
        .pad(32)
        .data(32)
        .parse());
    assert!(matches!(e, GgufError::TensorsOverlap { .. }), "{e}");
}

#[test]
fn rejects_huge_string_len() {
    // String value whose length exceeds the cap.
    let len = MAX_STRING_LEN + 1;
    let e = err(Raw::new(3, 0, 1).kv_raw("s", 8, &len.to_le_bytes()).parse());
    assert!(
        matches!(&e, GgufError::StringTooLong { context, len: l, limit, .. } if context == "s" && *l == len && *limit == MAX_STRING_LEN),
        "{e}"
    );
    // Key whose length exceeds the spec's 65535.
    let mut b = Raw::new(3, 0, 1).0;
    put_u64(&mut b, MAX_KEY_LEN + 1);
    assert!(matches!(
        err(GgufFile::parse(b)),
        GgufError::StringTooLong {
            what: "key",
            limit: MAX_KEY_LEN,
            ..
        }
    ));
    // Tensor name longer than ggml's 63.
    let e = err(Raw::new(3, 1, 0)
        .tensor(&"n".repeat(64), &[1], 0, 0)
        .parse());
    assert!(
        matches!(
            e,
            GgufError::StringTooLong {
                what: "tensor name",
                len: 64,
                limit: 63,
                ..
            }
        ),
        "{e}"
    );
    // Within the cap but past the end of the file.
    let e = err(Raw::new(3, 0, 1)
        .kv_raw("s", 8, &1000u64.to_le_bytes())
        .parse());
    assert!(matches!(e, GgufError::Truncated { need: 1000, .. }), "{e}");
}

#[test]
fn rejects_invalid_utf8() {
    let mut b = Raw::new(3, 0, 1).0;
    put_u64(&mut b, 2);
    b.extend_from_slice(&[0xff, 0xfe]);
    put_u32(&mut b, 0);
    b.push(0);
    assert!(matches!(
        err(GgufFile::parse(b)),
        GgufError::InvalidUtf8 {
            what: "key",
            offset: 32,
            ..
        }
    ));
}

#[test]
fn rejects_invalid_bool() {
    let e = err(Raw::new(3, 0, 1).kv_raw("flag", 7, &[2]).parse());
    assert!(
        matches!(&e, GgufError::InvalidBool { key, byte: 2, .. } if key == "flag"),
        "{e}"
    );
}

#[test]
fn rejects_huge_array_len() {
    let mut payload = ValueType::U8.id().to_le_bytes().to_vec();
    payload.extend_from_slice(&(MAX_ARRAY_LEN + 1).to_le_bytes());
    let e = err(Raw::new(3, 0, 1).kv_raw("arr", 9, &payload).parse());
    assert!(
        matches!(&e, GgufError::ArrayTooLong { key, len, limit, .. } if key == "arr" && *len == MAX_ARRAY_LEN + 1 && *limit == MAX_ARRAY_LEN),
        "{e}"
    );
    // Within the cap, but 1000 u64 elements cannot fit in the 4 bytes that follow: refused
    // before allocating.
    let mut payload = ValueType::U64.id().to_le_bytes().to_vec();
    payload.extend_from_slice(&1000u64.to_le_bytes());
    payload.extend_from_slice(&[0; 4]);
    let e = err(Raw::new(3, 0, 1).kv_raw("arr", 9, &payload).parse());
    assert!(
        matches!(
            e,
            GgufError::Truncated {
                what: "array elements",
                need: 8000,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn rejects_deep_nesting() {
    let mut v = Value::U8(7);
    for _ in 0..=MAX_NESTING_DEPTH {
        let et = v.value_type();
        v = Value::Array(et, vec![v]);
    }
    let e = err(Raw::new(3, 0, 1).kv("deep", &v).parse());
    assert!(
        matches!(&e, GgufError::NestingTooDeep { key, limit } if key == "deep" && *limit == MAX_NESTING_DEPTH),
        "{e}"
    );
    let mut w = GgufWriter::new();
    w.add("deep", v);
    assert!(matches!(w.check(), Err(GgufError::NestingTooDeep { .. })));
}

#[test]
fn rejects_too_many_tensors_and_kvs() {
    let e = err(Raw::new(3, MAX_TENSORS + 1, 0).parse());
    assert!(
        matches!(e, GgufError::TooMany { what: "tensor", count, limit } if count == MAX_TENSORS + 1 && limit == MAX_TENSORS),
        "{e}"
    );
    let e = err(Raw::new(3, 0, MAX_KV + 1).parse());
    assert!(
        matches!(e, GgufError::TooMany { what: "metadata pair", count, limit } if count == MAX_KV + 1 && limit == MAX_KV),
        "{e}"
    );
}

#[test]
fn rejects_too_many_values_in_total() {
    // The real cap (2^24) would need a 16 MiB file; a lowered cap exercises the same check.
    let limits = Limits {
        max_total_values: 10,
        ..Limits::DEFAULT
    };
    let arr = |n: usize| Value::Array(ValueType::U8, vec![Value::U8(1); n]);
    // The array counts as a value, so 9 elements + 1 = 10 fits and 10 + 1 does not.
    let ok = Raw::new(3, 0, 1).kv("a", &arr(9)).0;
    reader::parse(ok, &limits).unwrap();
    let bad = Raw::new(3, 0, 1).kv("a", &arr(10)).0;
    let e = reader::parse(bad, &limits).unwrap_err();
    assert!(
        matches!(&e, GgufError::TooManyValues { key, limit: 10 } if key == "a"),
        "{e}"
    );
    // Spread over several keys.
    let bad = Raw::new(3, 0, 3)
        .kv("a", &arr(4))
        .kv("b", &arr(4))
        .kv("c", &Value::U8(0))
        .0;
    let e = reader::parse(bad, &limits).unwrap_err();
    assert!(
        matches!(&e, GgufError::TooManyValues { key, .. } if key == "c"),
        "{e}"
    );
}

#[test]
fn rejects_bad_alignment() {
    for a in [0u32, 48, 3] {
        let mut w = sample_writer();
        w.set_alignment(a);
        let e = err(GgufFile::parse(w.to_bytes()));
        assert!(
            matches!(&e, GgufError::BadAlignment { value } if *value == format!("u32 {a}")),
            "{e}"
        );
    }
    let e = err(Raw::new(3, 0, 1)
        .kv("general.alignment", &Value::String("32".into()))
        .parse());
    assert!(matches!(e, GgufError::BadAlignment { .. }), "{e}");
    let e = err(Raw::new(3, 0, 1)
        .kv("general.alignment", &Value::I32(-32))
        .parse());
    assert!(matches!(e, GgufError::BadAlignment { .. }), "{e}");
}

#[test]
fn rejects_data_section_past_end_with_huge_alignment() {
    // A valid power of two, but the data section would start at 2^63.
    let e = err(Raw::new(3, 1, 1)
        .kv("general.alignment", &Value::U64(1 << 63))
        .tensor("w", &[8], 0, 0)
        .data(64)
        .parse());
    assert!(
        matches!(&e, GgufError::TensorPastEnd { data_offset, .. } if *data_offset == 1 << 63),
        "{e}"
    );
}

// ---------------------------------------------------------------- property-style robustness

#[test]
fn every_prefix_is_rejected_until_the_data_is_complete() {
    let full = sample_writer().to_bytes();
    let f = GgufFile::parse(full.clone()).unwrap();
    let end = data_end(&f);
    assert!(
        end < full.len(),
        "sample must end with padding to test both sides"
    );
    for len in 0..=full.len() {
        let r = GgufFile::parse(full[..len].to_vec());
        if len < end {
            assert!(r.is_err(), "prefix of {len} bytes parsed");
        } else {
            // Only trailing padding is missing: the file is still complete.
            let g = r.unwrap_or_else(|e| panic!("prefix of {len} bytes: {e}"));
            assert_eq!(g.metadata, f.metadata);
        }
    }
}

#[test]
fn random_corruption_never_panics() {
    let full = sample_writer().to_bytes();
    let mut rng = ChaCha8Rng::seed_from_u64(0x6767_7566);
    let (mut n_ok, mut n_err) = (0u32, 0u32);
    for _ in 0..4000 {
        let mut b = full.clone();
        for _ in 0..rng.gen_range(1..=4) {
            let pos = rng.gen_range(0..b.len());
            match rng.gen_range(0..4) {
                0 => b[pos] ^= 1 << rng.gen_range(0..8),
                1 => b[pos] = rng.gen(),
                // Plausible or absurd little-endian lengths/counts/offsets.
                2 | 3 => {
                    let v: u64 = if rng.gen_bool(0.5) {
                        rng.gen_range(0..4096)
                    } else {
                        rng.gen()
                    };
                    for (i, byte) in v.to_le_bytes().iter().enumerate() {
                        if let Some(slot) = b.get_mut(pos + i) {
                            *slot = *byte;
                        }
                    }
                }
                _ => unreachable!(),
            }
        }
        if rng.gen_bool(0.2) {
            let cut = rng.gen_range(0..b.len());
            b.truncate(cut);
        }
        match GgufFile::parse(b) {
            Ok(f) => {
                n_ok += 1;
                // Whatever parsed must be self-consistent: ranges inside the file, sized right.
                for t in &f.tensors {
                    let r = f.tensor_range(t);
                    assert!(r.end <= f.bytes().len());
                    assert_eq!(f.tensor_bytes(t).len() as u64, t.n_bytes, "{}", t.name);
                    assert_eq!(t.offset % f.alignment, 0);
                    let _ = t.n_elements();
                }
            }
            Err(e) => {
                n_err += 1;
                let _ = e.to_string();
            }
        }
    }
    println!("random corruption: {n_ok} parsed, {n_err} rejected");
    // Both outcomes occur (flips inside tensor data are harmless), so the mutations are
    // reaching the parser rather than all failing at the magic.
    assert!(n_ok > 0 && n_err > 0, "ok {n_ok}, err {n_err}");
}

// ---------------------------------------------------------------- real model files

fn model_path(name: &str) -> std::path::PathBuf {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models.sh to download the real models",
        p.display()
    );
    p
}

fn check_tensor(f: &GgufFile, name: &str, ty: GgmlType, dims: &[u64], offset: u64, n_bytes: u64) {
    let t = f
        .tensor(name)
        .unwrap_or_else(|| panic!("tensor {name} missing"));
    assert_eq!(
        (t.ty, t.dims.as_slice(), t.offset, t.n_bytes),
        (ty, dims, offset, n_bytes),
        "{name}"
    );
    assert_eq!(f.tensor_bytes(t).len() as u64, n_bytes);
}

#[test]
fn opens_real_smollm2_file() {
    let f = GgufFile::open(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap();
    // Expected values from gguf-py 0.19 GGUFReader on the same file.
    assert_eq!(f.version, 3);
    assert_eq!(f.metadata.len(), 33);
    assert_eq!(f.tensors.len(), 272);
    assert_eq!((f.alignment, f.data_offset), (32, 1_785_664));
    assert_eq!(f.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(f.get_u64("llama.block_count").unwrap(), 30);
    assert_eq!(f.get_u64("llama.embedding_length").unwrap(), 576);
    assert_eq!(f.get_f32("llama.rope.freq_base").unwrap(), 100000.0);
    let tokens = f.get_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 49152);
    assert_eq!(tokens[1000].as_str(), Some("()"));
    assert_eq!(f.get_array("tokenizer.ggml.merges").unwrap().len(), 48900);
    check_tensor(
        &f,
        "token_embd.weight",
        GgmlType::Q8_0,
        &[576, 49152],
        0,
        30_081_024,
    );
    check_tensor(
        &f,
        "blk.0.attn_norm.weight",
        GgmlType::F32,
        &[576],
        30_081_024,
        2304,
    );
    check_tensor(
        &f,
        "blk.0.ffn_down.weight",
        GgmlType::Q4_1,
        &[1536, 576],
        30_083_328,
        552_960,
    );
    check_tensor(
        &f,
        "output_norm.weight",
        GgmlType::F32,
        &[576],
        96_574_464,
        2304,
    );
}

#[test]
fn opens_real_gemma3_file() {
    let f = GgufFile::open(&model_path("gemma-3-270m-q4_k_m.gguf")).unwrap();
    // Expected values from gguf-py 0.19 GGUFReader on the same file.
    assert_eq!(f.version, 3);
    assert_eq!(f.metadata.len(), 33);
    assert_eq!(f.tensors.len(), 236);
    assert_eq!((f.alignment, f.data_offset), (32, 6_525_120));
    assert_eq!(f.get_str("general.architecture").unwrap(), "gemma3");
    assert_eq!(f.get_u64("gemma3.block_count").unwrap(), 18);
    assert_eq!(f.get_u64("gemma3.attention.sliding_window").unwrap(), 512);
    let tokens = f.get_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 262_144);
    assert_eq!(tokens[1000].as_str(), Some("put"));
    assert_eq!(f.get_array("tokenizer.ggml.scores").unwrap().len(), 262_144);
    check_tensor(&f, "output_norm.weight", GgmlType::F32, &[640], 0, 2560);
    check_tensor(
        &f,
        "token_embd.weight",
        GgmlType::Q8_0,
        &[640, 262_144],
        2560,
        178_257_920,
    );
    check_tensor(
        &f,
        "blk.0.attn_k.weight",
        GgmlType::Q5_0,
        &[640, 256],
        178_260_480,
        112_640,
    );
    check_tensor(
        &f,
        "blk.0.attn_output.weight",
        GgmlType::Q4K,
        &[1024, 640],
        178_376_704,
        368_640,
    );
    check_tensor(
        &f,
        "blk.0.ffn_down.weight",
        GgmlType::Q6K,
        &[2048, 640],
        179_371_008,
        1_075_200,
    );
    check_tensor(
        &f,
        "blk.17.post_ffw_norm.weight",
        GgmlType::F32,
        &[640],
        246_585_344,
        2560,
    );
}

/// The writer against gguf-py 0.19's `GGUFWriter` on the same inputs (gguf-py refuses empty
/// arrays, so the sample's empty array is dropped and its nested one filled). The expected hash
/// is blake3 of the file this script writes:
///
/// ```text
/// from gguf import GGUFWriter, GGUFValueType as V, GGMLQuantizationType as Q; import numpy as np
/// w = GGUFWriter(path, arch="llama")
/// w.add_uint8("t.u8", 200); w.add_int8("t.i8", -100); w.add_uint16("t.u16", 60000)
/// w.add_int16("t.i16", -30000); w.add_uint32("t.u32", 4000000000)
/// w.add_int32("t.i32", -2000000000); w.add_uint64("t.u64", 2**64-1); w.add_int64("t.i64", -2**63)
/// w.add_float32("t.f32", -1.5e-7); w.add_float64("t.f64", 3.141592653589793)
/// w.add_bool("t.bool", True); w.add_string("t.str", "héllo ▁wörld")
/// w.add_key_value("t.empty_str", "", V.STRING)
/// w.add_key_value("t.arr_i32", [1, -2], V.ARRAY, sub_type=V.INT32)
/// w.add_array("t.arr_nested", [["a"], ["b", "c"]])
/// filler = lambda n, s: np.array([(i*31 + s) & 0xff for i in range(n)], dtype=np.uint8)
/// w.add_tensor("a.f32", filler(20, 5).view(np.float32), raw_dtype=Q.F32)
/// w.add_tensor("b.q8_0", filler(204, 6).reshape(3, 68), raw_dtype=Q.Q8_0)
/// w.add_tensor("c.q4_k", filler(288, 6).reshape(1, 2, 144), raw_dtype=Q.Q4_K)
/// w.add_tensor("d.f16", filler(6, 5).view(np.float16).reshape(1, 1, 1, 3), raw_dtype=Q.F16)
/// w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
/// ```
#[test]
fn writer_matches_gguf_py_byte_for_byte() {
    let mut w = sample_writer();
    w.metadata.retain(|(k, _)| k != "t.arr_empty");
    let strings = |xs: &[&str]| {
        let items = xs.iter().map(|s| Value::String(s.to_string())).collect();
        Value::Array(ValueType::String, items)
    };
    w.add(
        "t.arr_nested",
        Value::Array(
            ValueType::Array,
            vec![strings(&["a"]), strings(&["b", "c"])],
        ),
    );
    let bytes = w.to_bytes();
    assert_eq!(bytes.len(), 1280);
    assert_eq!(
        blake3::hash(&bytes).to_hex().as_str(),
        "b6afcca4422da8fa46b3f588024812452042393b346b38cc402b652c8903b4ef"
    );
}

/// A missing file's OS error once in the whole chain (`{:#}`, as the cli prints errors),
/// not twice (it was both in the message and the chain's source).
#[test]
fn a_missing_file_names_its_os_error_once() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("absent.gguf");
    let e = anyhow::Error::new(GgufFile::open(&path).unwrap_err()).context("--model absent.gguf");
    let shown = format!("{e:#}");
    assert!(shown.contains(&path.display().to_string()), "{shown}");
    assert_eq!(shown.matches("(os error 2)").count(), 1, "{shown}");
}
