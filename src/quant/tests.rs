//! Tests for `crate::quant`. Rule: exactness claims are checked against vectors produced by
//! the independent python `gguf.quants` (scripts/gen-quant-vectors.py); accuracy claims
//! against an f64 dot of the dequantized row; batch invariance bit for bit.

use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn unhex(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    assert!(b.len().is_multiple_of(2), "odd hex length {}", b.len());
    let nib = |c: u8| match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => panic!("bad hex digit {c}"),
    };
    b.chunks_exact(2)
        .map(|p| (nib(p[0]) << 4) | nib(p[1]))
        .collect()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn vectors(ty: GgmlType) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/quant")
        .join(format!("{}.json", ty.name()));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/gen-quant-vectors.py)", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn section(v: &serde_json::Value, key: &str) -> Option<(usize, Vec<u8>, Vec<u8>)> {
    let s = v.get(key)?;
    let n = s["n_elements"].as_u64().expect("n_elements") as usize;
    Some((
        n,
        unhex(s["src"].as_str().expect("src")),
        unhex(s["out"].as_str().expect("out")),
    ))
}

#[test]
fn dequantize_matches_gguf_python_bit_for_bit_for_every_format() {
    for ty in GgmlType::ALL {
        let v = vectors(ty);
        assert_eq!(v["type"].as_str(), Some(ty.name()));
        let (n, src, out) = section(&v, "dequant").expect("dequant section");
        assert!(n >= 256, "{ty}: only {n} elements in the vectors");
        let want = f32s(&out);
        assert_eq!(want.len(), n);
        let mut got = vec![0.0f32; n];
        dequantize(ty, &src, &mut got).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{ty}: element {i}: got {g:e}, python {w:e}"
            );
        }
    }
}

#[test]
fn quantize_matches_gguf_python_bytes_where_python_has_a_quantizer() {
    use GgmlType::*;
    for ty in [F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0] {
        let v = vectors(ty);
        let (n, src, out) = section(&v, "quant")
            .unwrap_or_else(|| panic!("{ty}: no quant vectors but python has a quantizer"));
        let x = f32s(&src);
        assert_eq!(x.len(), n);
        let got = quantize(ty, &x).unwrap();
        assert_eq!(got.len(), out.len(), "{ty}: byte count");
        for (i, (g, w)) in got.iter().zip(&out).enumerate() {
            assert_eq!(g, w, "{ty}: byte {i} (block {})", i / ty.block_bytes());
        }
    }
}

fn random_input(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    // Mixed block magnitudes and an offset, like real weight rows.
    (0..n)
        .map(|i| {
            let scale = [0.02f32, 0.5, 3.0][(i / 256) % 3];
            let u: f32 = rng.gen_range(-1.0..1.0);
            let v: f32 = rng.gen_range(-1.0..1.0);
            scale * (u + v * v * v) + 0.01
        })
        .collect()
}

/// Relative RMS error budget of one round trip. Derived from the code width: half a step
/// of a b-bit grid over the block range is about 2^-b of it; K-quants also round their
/// sub-block scales, and simple round-to-nearest loses more than ggml's search.
fn rms_budget(ty: GgmlType) -> f64 {
    use GgmlType::*;
    match ty {
        F32 => 0.0,
        F16 => 1e-3,
        BF16 => 8e-3,
        Q8_0 => 1e-2,
        Q6K => 3e-2,
        Q5_0 | Q5_1 | Q5K => 6e-2,
        Q4_0 | Q4_1 | Q4K => 0.12,
        Q3K => 0.25,
        Q2K => 0.5,
    }
}

#[test]
fn quantize_roundtrip_stays_within_the_format_error_budget() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for ty in GgmlType::ALL {
        let n = 256 * 6;
        let x = random_input(&mut rng, n);
        let q = quantize(ty, &x).unwrap();
        assert_eq!(q.len() as u64, ty.row_bytes(n as u64).unwrap(), "{ty}");
        let mut y = vec![0.0f32; n];
        dequantize(ty, &q, &mut y).unwrap();
        // Per 256-element stretch (one magnitude) so small blocks are judged on their own.
        for (s, (xs, ys)) in x.chunks(256).zip(y.chunks(256)).enumerate() {
            let err: f64 = xs
                .iter()
                .zip(ys)
                .map(|(a, b)| ((a - b) as f64).powi(2))
                .sum();
            let sig: f64 = xs.iter().map(|a| (*a as f64).powi(2)).sum();
            let rel = (err / sig).sqrt();
            assert!(
                rel <= rms_budget(ty),
                "{ty}: stretch {s}: relative RMS error {rel:.4} > {}",
                rms_budget(ty)
            );
            assert!(ys.iter().all(|v| v.is_finite()), "{ty}: non-finite output");
        }
    }
}

#[test]
fn quantize_of_zeros_dequantizes_to_zeros() {
    for ty in GgmlType::ALL {
        let n = 512;
        let q = quantize(ty, &vec![0.0; n]).unwrap();
        let mut y = vec![1.0f32; n];
        dequantize(ty, &q, &mut y).unwrap();
        assert!(y.iter().all(|v| *v == 0.0), "{ty}: {:?}", &y[..8]);
    }
}

#[test]
fn dequantize_rejects_wrong_byte_count_and_partial_blocks_naming_them() {
    let e = dequantize(GgmlType::Q4_1, &[0u8; 39], &mut [0.0; 64]).unwrap_err();
    assert!(
        matches!(
            e,
            QuantError::ByteLength {
                expected: 40,
                got: 39,
                ..
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("q4_1") && msg.contains("40") && msg.contains("39"),
        "{msg}"
    );
    let e = dequantize(GgmlType::Q6K, &[0u8; 210], &mut [0.0; 255]).unwrap_err();
    assert!(
        matches!(
            e,
            QuantError::PartialBlock {
                n: 255,
                block_len: 256,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("q6_k") && e.to_string().contains("255"));
}

#[test]
fn quantize_rejects_partial_blocks_and_non_finite_block_input() {
    let e = quantize(GgmlType::Q8_0, &[0.0; 33]).unwrap_err();
    assert!(
        matches!(
            e,
            QuantError::PartialBlock {
                n: 33,
                block_len: 32,
                ..
            }
        ),
        "{e:?}"
    );
    let mut x = vec![0.5f32; 64];
    x[40] = f32::NAN;
    let e = quantize(GgmlType::Q4_0, &x).unwrap_err();
    assert!(
        matches!(e, QuantError::NonFinite { index: 40, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("40") && e.to_string().contains("q4_0"));
    // float formats represent non-finite values, so they keep them
    x[41] = f32::INFINITY;
    let b = quantize(GgmlType::F16, &x).unwrap();
    let mut y = vec![0.0f32; 64];
    dequantize(GgmlType::F16, &b, &mut y).unwrap();
    assert!(y[40].is_nan() && y[41] == f32::INFINITY);
}

/// Row lengths exercised per format: several blocks, the SmolLM2 widths, and for the float
/// formats lengths that are not multiples of 8.
fn lengths(ty: GgmlType) -> Vec<usize> {
    match ty.block_len() {
        1 => vec![1, 7, 8, 9, 33, 100, 576],
        32 => vec![32, 64, 96, 576, 1536],
        _ => vec![256, 512, 1536],
    }
}

fn random_row(rng: &mut ChaCha8Rng, ty: GgmlType, n: usize) -> Vec<u8> {
    quantize(ty, &random_input(rng, n)).unwrap()
}

fn random_x(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-2.0f32..2.0)).collect()
}

#[test]
fn dot_agrees_with_f64_dot_of_dequantized_row_within_1e5() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for ty in GgmlType::ALL {
        for n in lengths(ty) {
            let row = random_row(&mut rng, ty, n);
            let mut w = vec![0.0f32; n];
            dequantize(ty, &row, &mut w).unwrap();
            let x = random_x(&mut rng, n);
            // aligned: every product positive, so the exact result is its own magnitude
            let aligned: Vec<f32> = w
                .iter()
                .zip(&x)
                .map(|(w, x)| x.abs().copysign(*w))
                .collect();
            for (what, x) in [("random", &x), ("aligned", &aligned)] {
                let exact: f64 = w
                    .iter()
                    .zip(x.iter())
                    .map(|(a, b)| *a as f64 * *b as f64)
                    .sum();
                let mag: f64 = w
                    .iter()
                    .zip(x.iter())
                    .map(|(a, b)| (*a as f64 * *b as f64).abs())
                    .sum();
                let got = dot(ty, &row, x) as f64;
                assert!(
                    (got - exact).abs() <= 1e-5 * mag,
                    "{ty} n={n} {what}: dot {got} vs f64 {exact} (sum |w x| = {mag})"
                );
            }
        }
    }
}

#[test]
fn dot_many_is_bit_identical_to_dot_for_every_batch_size() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    for ty in GgmlType::ALL {
        for n in lengths(ty) {
            let row = random_row(&mut rng, ty, n);
            // batch sizes around the 16-vector pass size too
            let xs: Vec<Vec<f32>> = (0..33).map(|_| random_x(&mut rng, n)).collect();
            let single: Vec<f32> = xs.iter().map(|x| dot(ty, &row, x)).collect();
            for b in [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33] {
                let refs: Vec<&[f32]> = xs[..b].iter().map(|x| x.as_slice()).collect();
                let mut out = vec![f32::NAN; b];
                dot_many(ty, &row, &refs, &mut out);
                for i in 0..b {
                    assert_eq!(
                        out[i].to_bits(),
                        single[i].to_bits(),
                        "{ty} n={n} B={b} vector {i}: {} vs {}",
                        out[i],
                        single[i]
                    );
                }
            }
        }
    }
}

#[test]
fn f32_dot_follows_the_documented_lane_order() {
    // Independent spelling of the module rule: lane i % 8 accumulates w[i] * x[i] in order,
    // then ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    for n in [1usize, 5, 8, 13, 64, 77, 576] {
        let w = random_x(&mut rng, n);
        let x = random_x(&mut rng, n);
        let mut a = [0.0f32; 8];
        for i in 0..n {
            a[i % 8] += w[i] * x[i];
        }
        let want = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
        let row = quantize(GgmlType::F32, &w).unwrap();
        assert_eq!(
            dot(GgmlType::F32, &row, &x).to_bits(),
            want.to_bits(),
            "n={n}"
        );
    }
}

#[test]
fn q8_0_dot_follows_the_documented_block_order() {
    // Independent spelling of the 32-element symmetric rule on the dequantized codes:
    // acc[l] += d * ((q[l]x[l] + q[8+l]x[8+l]) + (q[16+l]x[16+l] + q[24+l]x[24+l])).
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    let n = 576;
    let row = random_row(&mut rng, GgmlType::Q8_0, n);
    let x = random_x(&mut rng, n);
    let mut a = [0.0f32; 8];
    for (blk, xb) in row.chunks(34).zip(x.chunks(32)) {
        let d = half::f16::from_le_bytes([blk[0], blk[1]]).to_f32();
        let q: Vec<f32> = blk[2..].iter().map(|b| *b as i8 as f32).collect();
        for l in 0..8 {
            let g = (q[l] * xb[l] + q[8 + l] * xb[8 + l])
                + (q[16 + l] * xb[16 + l] + q[24 + l] * xb[24 + l]);
            a[l] += d * g;
        }
    }
    let want = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    assert_eq!(dot(GgmlType::Q8_0, &row, &x).to_bits(), want.to_bits());
}

#[test]
fn dot_single_scale_f16_decoder_matches_half_for_every_bit_pattern() {
    for bits in 0..=u16::MAX {
        let want = half::f16::from_bits(bits).to_f32();
        let got = super::dot::f16_bits_to_f32(&bits.to_le_bytes(), 0);
        if want.is_nan() {
            assert!(got.is_nan(), "{bits:#06x}: {got}");
        } else {
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{bits:#06x}: {got:e} vs {want:e}"
            );
        }
    }
}

#[test]
fn q4_k_dot_follows_the_documented_super_block_order() {
    // Independent spelling of the K-quant rule for Q4_K: per 32-element chunk c,
    // t_c[l] = dl * ((q[l]x[l] + q[8+l]x[8+l]) + (q[16+l]x[16+l] + q[24+l]x[24+l]))
    //        - ml * ((x[l] + x[8+l]) + (x[16+l] + x[24+l])),
    // then acc[l] += ((t0 + t1) + (t2 + t3)) + ((t4 + t5) + (t6 + t7)) per super-block.
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    let n = 1024;
    let row = random_row(&mut rng, GgmlType::Q4K, n);
    let x = random_x(&mut rng, n);
    let mut a = [0.0f32; 8];
    for (blk, xs) in row.chunks(144).zip(x.chunks(256)) {
        let d = half::f16::from_le_bytes([blk[0], blk[1]]).to_f32();
        let dmin = half::f16::from_le_bytes([blk[2], blk[3]]).to_f32();
        let mut t = [[0.0f32; 8]; 8];
        for (c, tc) in t.iter_mut().enumerate() {
            let (sc, m) = super::dequant::scale_min_k4(&blk[4..16], c);
            let (dl, ml) = (d * sc as f32, dmin * m as f32);
            let q: Vec<f32> = (0..32)
                .map(|l| ((blk[16 + (c / 2) * 32 + l] >> (4 * (c % 2))) & 15) as f32)
                .collect();
            let xb = &xs[c * 32..c * 32 + 32];
            for l in 0..8 {
                let g = (q[l] * xb[l] + q[8 + l] * xb[8 + l])
                    + (q[16 + l] * xb[16 + l] + q[24 + l] * xb[24 + l]);
                let s = (xb[l] + xb[8 + l]) + (xb[16 + l] + xb[24 + l]);
                tc[l] = dl * g - ml * s;
            }
        }
        for l in 0..8 {
            a[l] += ((t[0][l] + t[1][l]) + (t[2][l] + t[3][l]))
                + ((t[4][l] + t[5][l]) + (t[6][l] + t[7][l]));
        }
    }
    let want = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    assert_eq!(dot(GgmlType::Q4K, &row, &x).to_bits(), want.to_bits());
}
