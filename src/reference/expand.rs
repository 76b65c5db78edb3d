//! `expand` (docs/math.md, first layer): every stream starts as the embedding, `x[t][i] = e[t]`.

use super::check;
use crate::config::Config;
use crate::error::Result;
use crate::tensor::{HostTensor, HostTensorMut};

/// `x[t][i][c] = e[t][c]` for every stream `i`. `e` is T rows of C, `x` T rows of n*C, both in
/// the same activation dtype (so the copy is exact).
pub fn expand(cfg: &Config, e: &HostTensor<'_>, x: &mut HostTensorMut<'_>) -> Result<()> {
    cfg.validate()?;
    let (n, c) = (cfg.n, cfg.c);
    let t = e.layout.tokens;
    let act = e.data.dtype();
    check::input("e", e, t, c, act)?;
    check::output("x", x, t, n * c, act)?;
    for ti in 0..t {
        for ch in 0..c {
            let v = e.at(ti, ch);
            for i in 0..n {
                x.set(ti, i * c + ch, v);
            }
        }
    }
    Ok(())
}
