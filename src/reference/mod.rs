//! The float64 (and float32) reference of every stage of MATH.md, forward and backward.
//! Work in progress: see issue 2.
