//! Samplers and reference densities: built-in references, the truncated normal random-walk
//! kernel, the truncated normal, the simulators of the TGM (Gibbs) and of LATKES chains, and
//! random-walk Metropolis on tabulated log densities (amortised ratio posteriors), tempered
//! sequential Monte Carlo on batched log ratios (`smc`).

pub mod kernel;
pub mod latkes_sim;
pub mod metropolis;
pub mod mixture_fit;
pub mod ref_discrete;
pub mod ref_steps;
pub mod reference;
pub mod smc;
pub mod tgm_sim;
pub mod truncnorm;
