//! GCN (gfx942) simulator. Work in progress: see issue 4.
