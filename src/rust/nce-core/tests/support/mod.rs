pub mod tgm_gibbs;
