//! Pins each kernel against an independent f64 evaluation of its textbook formula, and the
//! determinism rules (batch size and thread count never change a bit).

use super::*;
use crate::quant::{GgmlType, Weight};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn randv(rng: &mut ChaCha8Rng, n: usize, a: f32) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-a..a)).collect()
}

fn close(a: f32, b: f64, tol: f64) -> bool {
    ((a as f64) - b).abs() <= tol * (1.0 + b.abs())
}

#[test]
fn dot_and_sum_match_f64_and_follow_the_lane_order() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for n in [1usize, 7, 8, 9, 64, 100] {
        let a = randv(&mut rng, n, 1.0);
        let b = randv(&mut rng, n, 1.0);
        let want: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
        assert!(close(dot_f32(&a, &b), want, 1e-5), "n={n}");
        let s: f64 = a.iter().map(|x| *x as f64).sum();
        assert!(close(sum_f32(&a), s, 1e-5), "n={n}");
        // The documented order, spelled out independently.
        let mut lanes = [0.0f32; 8];
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            lanes[i % 8] += x * y;
        }
        let l = lanes;
        let tree = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
        assert_eq!(dot_f32(&a, &b).to_bits(), tree.to_bits(), "n={n}");
    }
}

#[test]
fn rms_norm_matches_f64_per_row() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let n = 40;
    let x = randv(&mut rng, 3 * n, 3.0);
    let w = randv(&mut rng, n, 2.0);
    let eps = 1e-5f32;
    let mut out = vec![0.0; x.len()];
    rms_norm(&x, &w, eps, &mut out);
    for r in 0..3 {
        let row = &x[r * n..(r + 1) * n];
        let ms: f64 = row.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / n as f64;
        let inv = 1.0 / (ms + eps as f64).sqrt();
        for i in 0..n {
            assert!(close(
                out[r * n + i],
                row[i] as f64 * inv * w[i] as f64,
                1e-5
            ));
        }
    }
    let mut y = x.clone();
    rms_norm_inplace(&mut y, &w, eps);
    assert_eq!(bits(&y), bits(&out));
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

#[test]
fn rope_norm_rotates_adjacent_pairs_by_pos_times_inverse_frequency() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let hd = 16;
    let base = 10000.0f32;
    let pos = 37;
    let x = randv(&mut rng, 2 * hd, 1.0);
    let mut y = x.clone();
    rope(&mut y, hd, pos, base, RopeStyle::Norm);
    for h in 0..2 {
        for i in 0..hd / 2 {
            let th = pos as f64 / (base as f64).powf(2.0 * i as f64 / hd as f64);
            let (a, b) = (x[h * hd + 2 * i] as f64, x[h * hd + 2 * i + 1] as f64);
            assert!(close(y[h * hd + 2 * i], a * th.cos() - b * th.sin(), 1e-5));
            assert!(close(
                y[h * hd + 2 * i + 1],
                a * th.sin() + b * th.cos(),
                1e-5
            ));
        }
    }
    // Position 0 is the identity.
    let mut z = x.clone();
    rope(&mut z, hd, 0, base, RopeStyle::Norm);
    assert_eq!(bits(&z), bits(&x));
}

#[test]
fn rope_frequency_factors_divide_each_pairs_angle() {
    let (hd, base) = (16, 500000.0f32);
    let table = |f: Option<&[f32]>, pos: usize| {
        let (mut c, mut s) = (vec![0.0; hd / 2], vec![0.0; hd / 2]);
        rope_table(hd, base, f, pos, &mut c, &mut s);
        (bits(&c), bits(&s))
    };
    // Every factor 2 at position 2p is no factor at p, bit for bit (2p * inv / 2 is exact).
    let twos = vec![2.0f32; hd / 2];
    for p in [1, 7, 100] {
        assert_eq!(table(Some(&twos), 2 * p), table(None, p), "pos {p}");
    }
    // All ones is no factor; one factor moves only its own pair, by dividing (not
    // multiplying) the angle.
    let ones = vec![1.0f32; hd / 2];
    assert_eq!(table(Some(&ones), 9), table(None, 9));
    let mut f = ones.clone();
    f[0] = 4.0;
    let (c, s) = table(Some(&f), 9);
    let (c0, s0) = table(None, 9);
    assert_eq!((&c[1..], &s[1..]), (&c0[1..], &s0[1..]));
    let a = 9.0f64 / 4.0; // pair 0: inverse frequency 1
    assert_eq!(
        (c[0], s[0]),
        ((a.cos() as f32).to_bits(), (a.sin() as f32).to_bits())
    );
}

#[test]
fn rope_neox_is_norm_under_the_half_interleave_permutation() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let hd = 32;
    let x = randv(&mut rng, hd, 1.0);
    // perm: element i of the neox head is element 2i (i < d/2) or 2(i-d/2)+1 of the norm head.
    let to_norm = |v: &[f32]| -> Vec<f32> {
        let mut o = vec![0.0; hd];
        for i in 0..hd / 2 {
            o[2 * i] = v[i];
            o[2 * i + 1] = v[i + hd / 2];
        }
        o
    };
    let mut a = x.clone();
    rope(&mut a, hd, 11, 1e6, RopeStyle::Neox);
    let mut b = to_norm(&x);
    rope(&mut b, hd, 11, 1e6, RopeStyle::Norm);
    assert_eq!(bits(&to_norm(&a)), bits(&b));
}

#[test]
fn attention_matches_f64_softmax_with_grouped_kv_heads() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let s = AttnShape {
        n_heads: 6,
        n_kv_heads: 2,
        head_dim: 8,
        scale: 0.35,
    };
    let n_pos = 13;
    let kvd = s.n_kv_heads * s.head_dim;
    let q = randv(&mut rng, s.n_heads * s.head_dim, 2.0);
    let k = randv(&mut rng, n_pos * kvd, 2.0);
    let v = randv(&mut rng, n_pos * kvd, 2.0);
    let mut out = vec![0.0; q.len()];
    attention(&q, &k, &v, n_pos, s, &mut out);
    let hd = s.head_dim;
    for h in 0..s.n_heads {
        let kh = h / 3;
        let sc: Vec<f64> = (0..n_pos)
            .map(|t| {
                (0..hd)
                    .map(|d| q[h * hd + d] as f64 * k[t * kvd + kh * hd + d] as f64)
                    .sum::<f64>()
                    * s.scale as f64
            })
            .collect();
        let m = sc.iter().cloned().fold(f64::MIN, f64::max);
        let z: f64 = sc.iter().map(|x| (x - m).exp()).sum();
        for d in 0..hd {
            let want: f64 = (0..n_pos)
                .map(|t| (sc[t] - m).exp() / z * v[t * kvd + kh * hd + d] as f64)
                .sum();
            assert!(close(out[h * hd + d], want, 1e-5), "h={h} d={d}");
        }
    }
}

#[test]
fn activations_match_their_f64_formulas() {
    for i in -60..=60 {
        let x = i as f32 * 0.25;
        let xd = x as f64;
        let g = 0.5
            * xd
            * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (xd + 0.044715 * xd.powi(3))).tanh());
        assert!(close(gelu_tanh(x), g, 1e-5), "gelu({x})");
        let s = xd / (1.0 + (-xd).exp());
        assert!(close(silu(x), s, 1e-5), "silu({x})");
    }
}

fn test_weight(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> (Weight, Vec<f32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let vals = randv(&mut rng, rows * cols, 1.0);
    let bytes = crate::quant::quantize(ty, &vals).expect("quantize");
    let w = Weight::from_bytes("w", ty, rows, cols, bytes).expect("weight");
    let mut deq = vec![0.0; rows * cols];
    crate::quant::dequantize(ty, w.bytes(), &mut deq).expect("dequantize");
    (w, deq)
}

#[test]
fn matmul_matches_f64_product_of_the_dequantized_weight() {
    for ty in [GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q4K] {
        let (rows, cols) = (37, 256);
        let (w, deq) = test_weight(ty, rows, cols, 6);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let x = randv(&mut rng, 2 * cols, 1.0);
        let mut out = vec![0.0; 2 * rows];
        matmul(&w, &x, 2, &mut out);
        for r in 0..2 {
            for o in 0..rows {
                let want: f64 = (0..cols)
                    .map(|i| deq[o * cols + i] as f64 * x[r * cols + i] as f64)
                    .sum();
                assert!(close(out[r * rows + o], want, 1e-4), "{ty} r={r} o={o}");
            }
        }
    }
}

#[test]
fn matmul_rows_are_bit_identical_for_batch_1_and_batch_3() {
    for ty in [
        GgmlType::Q8_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q6K,
    ] {
        let (rows, cols) = (300, 512);
        let (w, _) = test_weight(ty, rows, cols, 8);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let x = randv(&mut rng, 3 * cols, 1.0);
        let mut batch = vec![0.0; 3 * rows];
        matmul(&w, &x, 3, &mut batch);
        for r in 0..3 {
            let mut one = vec![0.0; rows];
            matmul(&w, &x[r * cols..(r + 1) * cols], 1, &mut one);
            assert_eq!(
                bits(&one),
                bits(&batch[r * rows..(r + 1) * rows]),
                "{ty} row {r}"
            );
        }
    }
}

#[test]
fn matmul_is_bit_identical_for_1_2_and_3_threads() {
    let (rows, cols) = (1000, 256);
    let (w, _) = test_weight(GgmlType::Q4_1, rows, cols, 10);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let x = randv(&mut rng, 2 * cols, 1.0);
    let run = |threads: usize, n: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        let mut out = vec![0.0; n * rows];
        pool.install(|| matmul(&w, &x[..n * cols], n, &mut out));
        bits(&out)
    };
    for n in [1, 2] {
        let one = run(1, n);
        assert_eq!(one, run(2, n), "rows={n}");
        assert_eq!(one, run(3, n), "rows={n}");
    }
}

#[test]
fn matmul_group_gives_each_weight_the_bits_of_its_own_matmul() {
    let (a, _) = test_weight(GgmlType::Q4_1, 96, 128, 12);
    let (b, _) = test_weight(GgmlType::Q8_0, 40, 128, 13);
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    for rows in [1, 3] {
        let x = randv(&mut rng, rows * 128, 1.0);
        let (mut ga, mut gb) = (vec![0.0; rows * 96], vec![0.0; rows * 40]);
        matmul_group(&[&a, &b], &x, rows, &mut [&mut ga, &mut gb]);
        let (mut sa, mut sb) = (vec![0.0; rows * 96], vec![0.0; rows * 40]);
        matmul(&a, &x, rows, &mut sa);
        matmul(&b, &x, rows, &mut sb);
        assert_eq!(bits(&ga), bits(&sa), "rows={rows}");
        assert_eq!(bits(&gb), bits(&sb), "rows={rows}");
    }
}
