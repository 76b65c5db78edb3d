//! A small reader and writer of NumPy `.npy` files (format versions 1.0, 2.0 and 3.0), for the
//! arrays `mhc run` exchanges with outside tools: little-endian float32 (`<f4`) or float64
//! (`<f8`), C order. Anything else (Fortran order, other dtypes, big-endian, truncated data) is
//! refused with a message that says what was found.

use crate::runner::Array;
use std::fmt;

const MAGIC: &[u8] = b"\x93NUMPY";

/// The element types read and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NpyDtype {
    F32,
    F64,
}

impl NpyDtype {
    fn descr(self) -> &'static str {
        match self {
            NpyDtype::F32 => "<f4",
            NpyDtype::F64 => "<f8",
        }
    }
    fn size(self) -> usize {
        match self {
            NpyDtype::F32 => 4,
            NpyDtype::F64 => 8,
        }
    }
}

/// Why a buffer is not an array this module reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyError(pub String);

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NpyError {}

fn err<T>(msg: impl Into<String>) -> Result<T, NpyError> {
    Err(NpyError(msg.into()))
}

/// The value of `key` in the header dict: the text after `'key':` up to the end of the value
/// (a quoted string, a parenthesized tuple, or a bare word).
fn dict_value<'h>(header: &'h str, key: &str) -> Result<&'h str, NpyError> {
    let pos = ["'", "\""]
        .iter()
        .find_map(|q| header.find(&format!("{q}{key}{q}")).map(|p| p + key.len() + 2))
        .ok_or_else(|| NpyError(format!("header has no {key:?} entry: {header}")))?;
    let rest = header[pos..].trim_start();
    let rest = rest.strip_prefix(':').ok_or_else(|| NpyError(format!("malformed header near {key:?}: {header}")))?;
    let rest = rest.trim_start();
    let end = match rest.chars().next() {
        Some(q @ ('\'' | '"')) => rest[1..].find(q).map(|e| e + 2),
        Some('(') => rest.find(')').map(|e| e + 1),
        Some(_) => rest.find([',', '}']),
        None => None,
    };
    match end {
        Some(e) => Ok(rest[..e].trim()),
        None => err(format!("malformed header near {key:?}: {header}")),
    }
}

fn parse_shape(text: &str) -> Result<Vec<usize>, NpyError> {
    let inner = text
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| NpyError(format!("shape is not a tuple: {text}")))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<usize>()
                .map_err(|_| NpyError(format!("bad dimension {s:?} in shape {text}")))
        })
        .collect()
}

/// Parses a `.npy` buffer. Returns the array (values widened exactly to f64) and its stored dtype.
pub fn read(bytes: &[u8]) -> Result<(Array, NpyDtype), NpyError> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return err("not a .npy file (bad magic)");
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (header_len, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 => {
            if bytes.len() < 12 {
                return err("truncated .npy header");
            }
            (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
        }
        _ => return err(format!(".npy format version {major}.{minor} is not supported (1.0, 2.0, 3.0 are)")),
    };
    let end = start
        .checked_add(header_len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| NpyError("truncated .npy header".into()))?;
    let header = std::str::from_utf8(&bytes[start..end]).map_err(|_| NpyError("the .npy header is not text".into()))?;
    let descr = dict_value(header, "descr")?.trim_matches(['\'', '"']);
    let dtype = match descr {
        "<f8" => NpyDtype::F64,
        "<f4" => NpyDtype::F32,
        other => {
            return err(format!(
                "dtype {other:?} is not supported: store little-endian float32 ('<f4') or float64 ('<f8')"
            ))
        }
    };
    match dict_value(header, "fortran_order")? {
        "False" => {}
        "True" => {
            return err("Fortran-order arrays are not supported: store the array in C order (np.ascontiguousarray)")
        }
        other => return err(format!("bad fortran_order value {other:?}")),
    }
    let shape = parse_shape(dict_value(header, "shape")?)?;
    let count =
        shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| NpyError("shape overflows".into()))?;
    let data = &bytes[end..];
    let want = count.checked_mul(dtype.size()).ok_or_else(|| NpyError("shape overflows".into()))?;
    if data.len() != want {
        return err(format!("data holds {} bytes, shape {:?} of {} needs {want}", data.len(), shape, dtype.descr()));
    }
    let values = match dtype {
        NpyDtype::F64 => data.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))).collect(),
        NpyDtype::F32 => {
            data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")) as f64).collect()
        }
    };
    Ok((Array { shape, data: values }, dtype))
}

/// Encodes `array` as a version 1.0 `.npy` buffer of `dtype` (f32 rounds each value once).
pub fn write(array: &Array, dtype: NpyDtype) -> Vec<u8> {
    let shape = match array.shape.len() {
        1 => format!("({},)", array.shape[0]),
        _ => format!("({})", array.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}", dtype.descr());
    // Pad with spaces and end with a newline so the data starts on a 64-byte boundary.
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + array.data.len() * dtype.size());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &v in &array.data {
        match dtype {
            NpyDtype::F64 => out.extend_from_slice(&v.to_le_bytes()),
            NpyDtype::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(major: u8, header: &str, data: &[u8]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[major, 0]);
        if major == 1 {
            b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        } else {
            b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        }
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn round_trips_f64_and_f32_with_aligned_headers() {
        let a = Array::new(vec![2, 3], vec![1.0, -2.5, 3.25, 1e-300, f64::MAX, -0.0]);
        let b = write(&a, NpyDtype::F64);
        assert_eq!((b.len() - a.data.len() * 8) % 64, 0);
        assert_eq!(read(&b).unwrap(), (a.clone(), NpyDtype::F64));
        let (r, dt) = read(&write(&a, NpyDtype::F32)).unwrap();
        assert_eq!(dt, NpyDtype::F32);
        assert_eq!(r.shape, a.shape);
        assert_eq!(r.data[1], -2.5);
        assert_eq!(r.data[3], 0.0); // 1e-300 underflows in f32
        for shape in [vec![], vec![5], vec![0, 4], vec![1, 2, 3, 1]] {
            let len = shape.iter().product();
            let a = Array::new(shape, (0..len).map(|i| i as f64 * 0.5).collect());
            assert_eq!(read(&write(&a, NpyDtype::F64)).unwrap().0, a);
        }
    }

    #[test]
    fn reads_numpy_headers_of_every_version() {
        let data: Vec<u8> = [1.5f32, 2.0, -3.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        for major in [1, 2, 3] {
            let b = raw(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }          \n", &data);
            let (a, dt) = read(&b).unwrap();
            assert_eq!((a.shape, a.data, dt), (vec![3], vec![1.5, 2.0, -3.0], NpyDtype::F32));
        }
        // Key order and spacing are not fixed by the format.
        let b = raw(1, "{\"shape\":(1, 3),\"fortran_order\":False,\"descr\":\"<f4\"}\n", &data);
        assert_eq!(read(&b).unwrap().0.shape, vec![1, 3]);
    }

    #[test]
    fn refuses_what_it_cannot_read_with_a_reason() {
        let d8 = [0u8; 8];
        let cases: [(Vec<u8>, &str); 7] = [
            (b"not numpy".to_vec(), "magic"),
            (raw(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }\n", &d8), "'<f4'"),
            (raw(1, "{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }\n", &d8), "\">f8\""),
            (raw(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (1,), }\n", &d8), "Fortran"),
            (raw(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n", &d8), "needs 16"),
            (raw(1, "{'descr': '<f8', 'fortran_order': False, }\n", &d8), "shape"),
            (raw(4, "{}", &d8), "version 4"),
        ];
        for (bytes, want) in cases {
            let e = read(&bytes).unwrap_err().0;
            assert!(e.contains(want), "{e:?} should mention {want:?}");
        }
        let mut t = write(&Array::new(vec![4], vec![1.0; 4]), NpyDtype::F64);
        t.truncate(20);
        assert!(read(&t).is_err());
    }

    #[test]
    fn mangled_headers_are_errors_not_panics() {
        let good = write(&Array::new(vec![3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), NpyDtype::F64);
        let mut rng = crate::reference::testing::Rng::new(0x5eed);
        let alphabet = b"{}()[],:'\" <>fFiTrueals0123456789L\n\x93\xff\xc3";
        for _ in 0..20_000 {
            let mut b = good.clone();
            for _ in 0..1 + rng.next_u64() % 4 {
                let at = (rng.next_u64() % 80) as usize;
                b[at] = alphabet[(rng.next_u64() % alphabet.len() as u64) as usize];
            }
            if rng.next_u64() % 8 == 0 {
                b.truncate((rng.next_u64() % b.len() as u64) as usize);
            }
            if let Ok((a, _)) = read(&b) {
                assert_eq!(a.data.len(), a.shape.iter().product::<usize>());
            }
        }
    }
}
