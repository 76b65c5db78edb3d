//! Token parallelism that keeps results bit-identical whatever the core count: tokens are cut
//! into fixed chunks of [`CHUNK`] tokens, chunks are computed on all cores in waves, and
//! everything order-sensitive (writing outputs, adding per-chunk gradient sums) happens on the
//! calling thread in chunk order.

use std::num::NonZeroUsize;

/// Tokens per chunk. Fixed (never derived from the core count) so that every reduction has the
/// same shape on every machine.
pub(crate) const CHUNK: usize = 16;

/// Cores to use: `MHC_REFERENCE_THREADS` if set to a positive number, else all of them.
/// Results do not depend on it.
fn threads() -> usize {
    match std::env::var("MHC_REFERENCE_THREADS").ok().and_then(|v| v.parse::<usize>().ok()) {
        Some(t) if t > 0 => t,
        _ => std::thread::available_parallelism().map(NonZeroUsize::get).unwrap_or(1),
    }
}

/// For every chunk of tokens `[start, end)`, `work(start, end, &mut state)` runs on some core,
/// then `emit(start, end, &state)` runs on the calling thread, in chunk order. `make` builds one
/// state per concurrently processed chunk (states are reused across waves, so `work` must reset
/// whatever it accumulates).
pub(crate) fn for_chunks<S, M, W, E>(tokens: usize, make: M, work: W, emit: E)
where
    S: Send,
    M: Fn() -> S,
    W: Fn(usize, usize, &mut S) + Sync,
    E: FnMut(usize, usize, &S),
{
    for_chunks_on(threads(), tokens, make, work, emit)
}

/// [`for_chunks`] on at most `threads` cores.
fn for_chunks_on<S, M, W, E>(threads: usize, tokens: usize, make: M, work: W, mut emit: E)
where
    S: Send,
    M: Fn() -> S,
    W: Fn(usize, usize, &mut S) + Sync,
    E: FnMut(usize, usize, &S),
{
    let chunks = tokens.div_ceil(CHUNK);
    if chunks == 0 {
        return;
    }
    let nt = threads.min(chunks).max(1);
    let mut states: Vec<S> = (0..nt).map(|_| make()).collect();
    let range = |c: usize| (c * CHUNK, ((c + 1) * CHUNK).min(tokens));
    let mut first = 0;
    while first < chunks {
        let wave = nt.min(chunks - first);
        if wave == 1 {
            let (s, e) = range(first);
            work(s, e, &mut states[0]);
        } else {
            std::thread::scope(|scope| {
                for (i, st) in states.iter_mut().take(wave).enumerate() {
                    let (s, e) = range(first + i);
                    let work = &work;
                    scope.spawn(move || work(s, e, st));
                }
            });
        }
        for (i, st) in states.iter().take(wave).enumerate() {
            let (s, e) = range(first + i);
            emit(s, e, st);
        }
        first += wave;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_token_once_emitted_in_order() {
        for tokens in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 7 * CHUNK + 3] {
            let mut seen = Vec::new();
            for_chunks(
                tokens,
                Vec::new,
                |s, e, st: &mut Vec<usize>| {
                    st.clear();
                    st.extend(s..e);
                },
                |s, e, st| {
                    assert_eq!(st, &(s..e).collect::<Vec<_>>());
                    seen.extend_from_slice(st);
                },
            );
            assert_eq!(seen, (0..tokens).collect::<Vec<_>>());
        }
    }

    #[test]
    fn chunked_sums_do_not_depend_on_the_core_count() {
        let values: Vec<f64> = (0..1000).map(|i| ((i * 7919) % 1000) as f64 * 1e-3 + 1.0 / (i + 1) as f64).collect();
        let sum_on = |threads: usize| {
            let mut total = 0.0f64;
            for_chunks_on(
                threads,
                values.len(),
                || 0.0f64,
                |s, e, acc| *acc = values[s..e].iter().sum(),
                |_, _, acc| total += *acc,
            );
            total.to_bits()
        };
        let one = sum_on(1);
        for threads in [2, 3, 4, 7, 16, 64] {
            assert_eq!(sum_on(threads), one, "{threads} threads");
        }
    }
}
