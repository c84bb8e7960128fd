//! Truth tests of the trained ratio network on a model with an exact answer, and its speed.
//!
//! theta ~ N(0, 1), x = n = 10 iid N(theta, 1) draws: the sample mean is sufficient and
//! log r(theta, x) = log N(xbar; theta, 1/n) - log N(xbar; 0, 1 + 1/n).

use super::*;
use crate::estimators::mlp::Activation;
use crate::rng::stream_rng;
use rand::Rng;
use rand_distr::StandardNormal;

const N_OBS: usize = 10;

fn log_normal(v: f64, mean: f64, var: f64) -> f64 {
    -0.5 * ((2.0 * std::f64::consts::PI * var).ln() + (v - mean) * (v - mean) / var)
}

fn exact_log_ratio(theta: f64, x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let xbar = x.iter().sum::<f64>() / n;
    log_normal(xbar, theta, 1.0 / n) - log_normal(xbar, 0.0, 1.0 + 1.0 / n)
}

/// `n` simulations (theta, x) from the joint, by stream `stream` of seed 77.
fn simulate(n: usize, stream: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = stream_rng(77, stream);
    let mut theta = Vec::with_capacity(n);
    let mut x = Vec::with_capacity(n * N_OBS);
    for _ in 0..n {
        let t: f64 = rng.sample(StandardNormal);
        theta.push(t);
        for _ in 0..N_OBS {
            x.push(t + rng.sample::<f64, _>(StandardNormal));
        }
    }
    (theta, x)
}

/// RMSE of the learned log ratio against the exact one over the posterior-typical region: x
/// from its marginal, theta from the posterior N(n xbar / (n + 1), 1 / (n + 1)) given that x.
fn rmse(net: &RatioNet) -> f64 {
    let m = 500;
    let (_, x) = simulate(m, 9);
    let mut rng = stream_rng(77, 10);
    let nf = N_OBS as f64;
    let theta: Vec<f64> = (0..m)
        .map(|i| {
            let xbar = x[i * N_OBS..(i + 1) * N_OBS].iter().sum::<f64>() / nf;
            nf * xbar / (nf + 1.0) + rng.sample::<f64, _>(StandardNormal) / (nf + 1.0).sqrt()
        })
        .collect();
    let feat = net.embed(&x).unwrap();
    let got = net.log_ratio(&theta, &[], &feat).unwrap();
    let err: Vec<f64> = (0..m)
        .map(|i| got[i] - exact_log_ratio(theta[i], &x[i * N_OBS..(i + 1) * N_OBS]))
        .collect();
    let bias = err.iter().sum::<f64>() / m as f64;
    let rmse = (err.iter().map(|e| e * e).sum::<f64>() / m as f64).sqrt();
    println!("bias {bias:.4}, RMSE {rmse:.4}");
    rmse
}

/// Train on `n` simulations with `spec` and `loss`; the RMSE of the result.
fn fit(spec: EmbeddingSpec, loss: Loss, n: usize) -> f64 {
    let (theta, x) = simulate(n, 0);
    let data = Rows {
        theta: &theta,
        z: &[],
        x: &x,
    };
    let arch = Architecture::new(1, 0, N_OBS, &spec, &[32, 32], Activation::Relu).unwrap();
    let mut s = RatioSettings::recommended(loss, 4);
    s.step = 1e-3;
    s.batch = 256;
    s.n_negatives = s.n_negatives.max(4);
    s.max_epochs = 150;
    s.patience = 12;
    s.step_patience = 4;
    let r = train(&arch, &data, &s, &mut |_| {}, &|| false).unwrap();
    let net = RatioNet::new(arch, r.params).unwrap();
    let e = rmse(&net);
    println!(
        "{spec:?} {loss:?}: RMSE {e:.4} (best epoch {}, held-out loss {:.4})",
        r.best_epoch, r.held_out_loss
    );
    e
}

fn deep_sets() -> EmbeddingSpec {
    EmbeddingSpec::Pooled {
        item: 1,
        window: 1,
        hidden: vec![16],
        out: 4,
    }
}

/// The largest RMSE accepted (log-ratio units) over the posterior-typical region, where the log
/// ratio spans about 3 units, after 50,000 simulations: NRE and NRE-C with the DeepSets embedding
/// (measured 0.12 and 0.10).
const TOLERANCE: f64 = 0.15;
/// BNRE's balance penalty trades accuracy for conservativeness (measured 0.25, biased low); the
/// head alone or a dense embedding must learn the mean of the 10 draws from raw values, with no
/// pooling to help (measured 0.23 without an embedding, 0.17 with a dense one).
const LOOSE_TOLERANCE: f64 = 0.3;

/// Release only (a minute in debug builds):
/// `cargo test --release -p nce-core --lib ratio_net::tests -- --ignored --nocapture`
#[test]
#[ignore]
fn nre_with_deep_sets_recovers_the_exact_log_ratio() {
    assert!(fit(deep_sets(), Loss::Nre, 50_000) < TOLERANCE);
}

/// Release only (a minute in debug builds):
/// `cargo test --release -p nce-core --lib ratio_net::tests -- --ignored --nocapture`
#[test]
#[ignore]
fn nrec_with_deep_sets_recovers_the_exact_log_ratio() {
    assert!(fit(deep_sets(), Loss::Nrec { gamma: 1.0 }, 50_000) < TOLERANCE);
}

/// Release only (see above).
#[test]
#[ignore]
fn bnre_with_deep_sets_recovers_the_exact_log_ratio() {
    assert!(fit(deep_sets(), Loss::Bnre { lambda: 100.0 }, 50_000) < LOOSE_TOLERANCE);
}

/// Release only (a minute in debug builds):
/// `cargo test --release -p nce-core --lib ratio_net::tests -- --ignored --nocapture`
#[test]
#[ignore]
fn nre_without_and_with_a_dense_embedding_recovers_the_exact_log_ratio() {
    assert!(fit(EmbeddingSpec::None, Loss::Nre, 50_000) < LOOSE_TOLERANCE);
    let dense = EmbeddingSpec::Dense {
        hidden: vec![16],
        out: 4,
    };
    assert!(fit(dense, Loss::Nre, 50_000) < LOOSE_TOLERANCE);
}

/// The pure matrix-product time of the products of one epoch (each layer's forward product, its
/// weight gradient and its input gradient, on the blocks' shapes), one thread.
fn gemm_seconds(layers: &[(usize, usize)], rows: usize, blocks: usize) -> f64 {
    use crate::estimators::mlp::network::gemm;
    let big = layers.iter().map(|&(f, w)| f.max(w)).max().unwrap() * rows;
    let a = vec![0.5; big];
    let b = vec![0.25; big];
    let mut c = vec![0.0; big];
    let t = std::time::Instant::now();
    for _ in 0..blocks {
        for &(fan, w) in layers {
            gemm((rows, fan, w), 1.0, (&a, fan, 1), (&b, 1, fan), 1.0, &mut c);
            gemm((w, rows, fan), 1.0, (&a, 1, w), (&b, fan, 1), 1.0, &mut c);
            gemm((rows, w, fan), 1.0, (&a, w, 1), (&b, fan, 1), 0.0, &mut c);
        }
    }
    t.elapsed().as_secs_f64()
}

/// Ignored speed check: one epoch over 100,000 pairs (50,000 simulations, K = 1) with a dense
/// embedding of 10 inputs (10-32-8) and a 64-64 head, against the pure matrix products of the
/// same shapes.
/// `cargo test --release -p nce-core --lib ratio_net::tests::speed -- --ignored --nocapture`
#[test]
#[ignore]
fn speed() {
    use crate::engine::design::with_threads;
    let n = 50_000;
    let (q, d) = (10, 2);
    let mut rng = stream_rng(1, 0);
    let theta: Vec<f64> = (0..n * d).map(|_| rng.gen::<f64>()).collect();
    let x: Vec<f64> = (0..n * q).map(|_| rng.gen::<f64>()).collect();
    let data = Rows {
        theta: &theta,
        z: &[],
        x: &x,
    };
    let spec = EmbeddingSpec::Dense {
        hidden: vec![32],
        out: 8,
    };
    let arch = Architecture::new(d, 0, q, &spec, &[64, 64], Activation::Relu).unwrap();
    let mut s = RatioSettings::recommended(Loss::Nre, 1);
    s.held_out = 0.0;
    s.max_epochs = 3;
    s.patience = 100;
    // forward + backward = 3 products of 2 flops per multiply-add.
    let flops = 6.0 * n as f64 * arch.macs(2) as f64;
    for threads in [1, 2] {
        let t = std::time::Instant::now();
        with_threads(threads, || train(&arch, &data, &s, &mut |_| {}, &|| false))
            .unwrap()
            .unwrap();
        let per = t.elapsed().as_secs_f64() / 3.0;
        println!(
            "{threads} thread(s): {per:.3} s per epoch, {:.2} GFLOP/s",
            flops / per / 1e9
        );
    }
    let blocks = n.div_ceil(train::BLOCK_ROWS);
    let head = [(d + 8, 64), (64, 64), (64, 1)];
    let emb = [(q, 32), (32, 8)];
    let g = gemm_seconds(&head, 2 * train::BLOCK_ROWS, blocks) + gemm_seconds(&emb, train::BLOCK_ROWS, blocks);
    println!(
        "pure products of the same shapes, one thread: {g:.3} s per epoch, {:.2} GFLOP/s",
        flops / g / 1e9
    );
}
