//! Neural-network energies fitted by NCE (the deep energy-based models of the source texts) and
//! neural ratio classifiers: a multilayer perceptron (`network`) and its training (`train`).

pub mod network;
pub mod train;

pub use network::{Activation, Network};
pub use train::{evaluate, train, EpochReport, TrainData, TrainResult, TrainSettings, Trainer};
