//! Placeholder: the pipeline benchmarks land in the next commit.
fn main() {}
