//! A small reader and writer of NumPy `.npy` files (format versions 1.0, 2.0 and 3.0), for the
//! arrays `mhc run` exchanges with outside tools: little-endian float32 (`<f4`) or float64
//! (`<f8`), C order. Anything else (Fortran order, other dtypes, big-endian, truncated data) is
//! refused with a message that says what was found. Files are read header first: the header
//! fixes the size of the data (checked arithmetic), a file of any other size is refused before
//! its data is read, and then exactly that many bytes are read ([`open`], [`read_file`]).

use crate::runner::Array;
use std::fmt;
use std::io::Read;
use std::path::Path;

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

/// Largest header accepted, in bytes (numpy writes well under 1 KiB and refuses to read more
/// than 10,000 by default): a bigger length field is refused before anything is read.
pub const MAX_HEADER_BYTES: usize = 65_536;

/// What a `.npy` header says: the element type and shape, and how many bytes the header and
/// the data take. `data_bytes` is computed with checked arithmetic and bounded so that the
/// values fit in memory as f64 ([`crate::runner::MAX_VALUES`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub dtype: NpyDtype,
    pub shape: Vec<usize>,
    /// Magic, version, length field and header text.
    pub header_bytes: usize,
    /// Bytes of data the shape and dtype need.
    pub data_bytes: usize,
}

impl Header {
    /// Elements of the array.
    pub fn count(&self) -> usize {
        self.data_bytes / self.dtype.size()
    }
}

/// Reads exactly `buf.len()` bytes; `what` names them in the error.
fn fill(r: &mut impl Read, buf: &mut [u8], what: &str) -> Result<(), NpyError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => NpyError(format!("truncated .npy {what}")),
        _ => NpyError(format!("reading the .npy {what}: {e}")),
    })
}

/// Reads and checks a `.npy` header from `r`, leaving `r` at the first data byte. Reads at most
/// [`MAX_HEADER_BYTES`] + 12 bytes, whatever the input.
pub fn read_header(r: &mut impl Read) -> Result<Header, NpyError> {
    let mut lead = [0u8; 8];
    r.read_exact(&mut lead).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => NpyError("not a .npy file (bad magic)".into()),
        _ => NpyError(format!("reading the .npy magic: {e}")),
    })?;
    if &lead[..6] != MAGIC {
        return err("not a .npy file (bad magic)");
    }
    let (major, minor) = (lead[6], lead[7]);
    let (header_len, start) = match major {
        1 => {
            let mut b = [0u8; 2];
            fill(r, &mut b, "header")?;
            (u16::from_le_bytes(b) as usize, 10usize)
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            fill(r, &mut b, "header")?;
            (u32::from_le_bytes(b) as usize, 12)
        }
        _ => return err(format!(".npy format version {major}.{minor} is not supported (1.0, 2.0, 3.0 are)")),
    };
    if header_len > MAX_HEADER_BYTES {
        return err(format!("the .npy header claims {header_len} bytes, more than the {MAX_HEADER_BYTES} accepted"));
    }
    let mut text = vec![0u8; header_len];
    fill(r, &mut text, "header")?;
    let header = std::str::from_utf8(&text).map_err(|_| NpyError("the .npy header is not text".into()))?;
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
    let too_big = || NpyError(format!("shape {shape:?} has more elements than fit in memory"));
    let count = crate::runner::numel(&shape).filter(|&c| c <= crate::runner::MAX_VALUES).ok_or_else(too_big)?;
    let data_bytes = count.checked_mul(dtype.size()).ok_or_else(too_big)?;
    Ok(Header { dtype, shape, header_bytes: start + header_len, data_bytes })
}

/// Reads the data `header` describes from `r` (positioned after the header): exactly
/// `header.data_bytes` bytes, then requires the end of the input. Memory is reserved once, for
/// the values, and never more than the header implies.
pub fn read_data(r: &mut impl Read, header: &Header) -> Result<Array, NpyError> {
    let need = header.data_bytes;
    let mut values: Vec<f64> = Vec::new();
    values
        .try_reserve_exact(header.count())
        .map_err(|_| NpyError(format!("cannot allocate {} values for shape {:?}", header.count(), header.shape)))?;
    // `need` is a whole number of elements and 2^16 a multiple of 8: every chunk is too.
    let mut chunk = vec![0u8; need.min(1 << 16)];
    let mut got = 0usize;
    while got < need {
        let len = (need - got).min(chunk.len());
        let part = &mut chunk[..len];
        if let Err(e) = r.read_exact(part) {
            return err(match e.kind() {
                std::io::ErrorKind::UnexpectedEof => format!(
                    "data holds fewer than the {need} bytes shape {:?} of {} needs",
                    header.shape,
                    header.dtype.descr()
                ),
                _ => format!("reading the .npy data: {e}"),
            });
        }
        got += part.len();
        decode(header.dtype, part, &mut values);
    }
    let mut extra = [0u8; 1];
    loop {
        match r.read(&mut extra) {
            Ok(0) => break,
            Ok(_) => {
                return err(format!(
                    "data holds more than the {need} bytes shape {:?} of {} needs",
                    header.shape,
                    header.dtype.descr()
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return err(format!("reading the .npy data: {e}")),
        }
    }
    Ok(Array { shape: header.shape.clone(), data: values })
}

fn decode(dtype: NpyDtype, bytes: &[u8], out: &mut Vec<f64>) {
    match dtype {
        NpyDtype::F64 => out.extend(bytes.chunks_exact(8).map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            f64::from_le_bytes(b)
        })),
        NpyDtype::F32 => out.extend(bytes.chunks_exact(4).map(|c| {
            let mut b = [0u8; 4];
            b.copy_from_slice(c);
            f32::from_le_bytes(b) as f64
        })),
    }
}

/// Parses a `.npy` buffer. Returns the array (values widened exactly to f64) and its stored dtype.
pub fn read(bytes: &[u8]) -> Result<(Array, NpyDtype), NpyError> {
    let mut r = bytes;
    let header = read_header(&mut r)?;
    if r.len() != header.data_bytes {
        return err(format!(
            "data holds {} bytes, shape {:?} of {} needs {}",
            r.len(),
            header.shape,
            header.dtype.descr(),
            header.data_bytes
        ));
    }
    let array = read_data(&mut r, &header)?;
    Ok((array, header.dtype))
}

/// An opened `.npy` file whose header has been read and checked against the file's size.
#[derive(Debug)]
pub struct NpyFile {
    reader: std::io::BufReader<std::fs::File>,
    header: Header,
}

/// Opens a `.npy` file: refuses anything but a regular file (a folder, a FIFO, a device such as
/// `/dev/zero`) before opening it, reads and checks the header, and checks that the file holds
/// exactly the bytes the header implies. Nothing beyond the header is read.
pub fn open(path: &Path) -> Result<NpyFile, NpyError> {
    let meta = std::fs::metadata(path).map_err(|e| NpyError(e.to_string()))?;
    if !meta.is_file() {
        return err("not a regular file (folders, FIFOs and devices are refused)");
    }
    let file = std::fs::File::open(path).map_err(|e| NpyError(e.to_string()))?;
    // The path may have been replaced since: check what was opened.
    let meta = file.metadata().map_err(|e| NpyError(e.to_string()))?;
    if !meta.is_file() {
        return err("not a regular file (folders, FIFOs and devices are refused)");
    }
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let header = read_header(&mut reader)?;
    let expected = header.header_bytes as u64 + header.data_bytes as u64;
    if meta.len() != expected {
        return err(format!(
            "data holds {} bytes, shape {:?} of {} needs {}",
            meta.len().saturating_sub(header.header_bytes as u64),
            header.shape,
            header.dtype.descr(),
            header.data_bytes
        ));
    }
    Ok(NpyFile { reader, header })
}

impl NpyFile {
    /// The checked header.
    pub fn header(&self) -> &Header {
        &self.header
    }
    /// Reads the data: exactly the bytes the header implies, then the end of the file.
    pub fn read(mut self) -> Result<(Array, NpyDtype), NpyError> {
        let array = read_data(&mut self.reader, &self.header)?;
        Ok((array, self.header.dtype))
    }
}

/// [`open`] then [`NpyFile::read`].
pub fn read_file(path: &Path) -> Result<(Array, NpyDtype), NpyError> {
    open(path)?.read()
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
    fn sizes_come_from_the_header_with_checked_arithmetic() {
        // A shape whose element count overflows, and one that fits usize but not memory.
        for shape in ["(4611686018427387904, 4, 4096)", "(1152921504606846976,)"] {
            let b = raw(1, &format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}\n"), &[]);
            let e = read(&b).unwrap_err().0;
            assert!(e.contains("more elements than fit in memory"), "{e}");
        }
        // A header length beyond the bound is refused before it is read.
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[2, 0]);
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_header(&mut &b[..]).unwrap_err().0.contains("header claims"));
        // Data longer than the shape needs: refused, and a reader is never read past one byte
        // beyond the data.
        let good = write(&Array::new(vec![2], vec![1.0, 2.0]), NpyDtype::F64);
        let mut long = good.clone();
        long.extend_from_slice(&[0; 8]);
        assert!(read(&long).unwrap_err().0.contains("needs 16"));
        let mut r = std::io::Read::chain(&good[..], std::io::repeat(0));
        let h = read_header(&mut r).unwrap();
        assert_eq!((h.data_bytes, h.count()), (16, 2));
        assert!(read_data(&mut r, &h).unwrap_err().0.contains("more than the 16 bytes"));
    }

    #[test]
    fn files_are_checked_before_their_data_is_read() {
        let dir = std::env::temp_dir().join(format!("mhc-npy-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A valid header for 2 values with a 3 GiB (sparse) tail: refused from the file size.
        let path = dir.join("long.npy");
        std::fs::write(&path, write(&Array::new(vec![2], vec![1.0, 2.0]), NpyDtype::F64)).unwrap();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(3 << 30).unwrap();
        let start = std::time::Instant::now();
        let e = read_file(&path).unwrap_err().0;
        assert!(e.contains("needs 16") && start.elapsed().as_secs() < 2, "{e}");
        // Not regular files: a folder, a device that never ends.
        assert!(read_file(&dir).unwrap_err().0.contains("not a regular file"));
        if Path::new("/dev/zero").exists() {
            assert!(read_file(Path::new("/dev/zero")).unwrap_err().0.contains("not a regular file"));
        }
        let ok = dir.join("ok.npy");
        std::fs::write(&ok, write(&Array::new(vec![1, 3], vec![1.0, 2.0, 3.0]), NpyDtype::F32)).unwrap();
        assert_eq!(read_file(&ok).unwrap().0.data, vec![1.0, 2.0, 3.0]);
        let _ = std::fs::remove_dir_all(&dir);
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
