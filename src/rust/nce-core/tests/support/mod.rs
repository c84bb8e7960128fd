pub mod tgm_gibbs;
pub mod threads;
