//! LATKES (log-additive transition kernels for eye-movement scanpaths): the window quadrature
//! of each transition's normaliser. Its simulator is `sampling::latkes_sim`, its maps `spatial`.

pub mod quadrature;
