//! Code-object loader: parses cubins and AMDGPU code objects into `Arch` and per-kernel
//! resources; holds the variant registry and the selector. No GPU, no FFI.
