//! The penalised engine: designs, penalties, families, (P-)IRLS, REML smoothing parameters,
//! alias handling and sandwich covariances.

pub mod alias;
pub mod basis;
pub mod constraint;
pub mod design;
pub mod discrete;
mod extreme_eigen;
pub mod family;
pub mod freml;
pub mod grouped;
pub mod irls;
pub mod knots;
pub mod ln_fast;
mod newton;
pub mod penalty;
pub mod pirls;
pub mod print_order;
pub mod reml;
pub mod rounding;
mod row_pairs;
pub mod sandwich;
pub mod shards;
pub(crate) mod simd;
mod tile_product;
