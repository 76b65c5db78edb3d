//! `mhc asm [--check] [--update-catalogue]`: the assembler driver.
//!
//! Assembles every kernel source with the pinned tools into `asm/bin/` and regenerates the
//! embedded-image table `asm/src/images.rs`:
//!
//! | source                    | tool                                                     | output                       |
//! |---------------------------|----------------------------------------------------------|------------------------------|
//! | `asm/ptx/sm90/<k>.ptx`    | `ptxas -arch=sm_90a` (12.9.86)                           | `asm/bin/sm90/<k>.cubin`     |
//! | `asm/ptx/sm100/<k>.ptx`   | `ptxas -arch=sm_100a` (12.9.86)                          | `asm/bin/sm100/<k>.cubin`    |
//! | `asm/gcn/gfx942/<k>.s`    | `llvm-mc-19 -mcpu=gfx942 --amdhsa-code-object-version=5 -I asm/gcn/gfx942` then `ld.lld-19 -shared` | `asm/bin/gfx942/<k>.hsaco` |
//!
//! Both tool chains are deterministic and embed no path or time (checked: the same source
//! assembled from two different folders gives identical bytes), so `--check` can demand
//! byte-identical output. `--check` assembles into a temporary folder and names every file
//! that differs, is missing or is extra, the generated table included; it writes nothing.
//! `--update-catalogue` also rewrites each `expect = {...}` line of `asm/catalogue.toml` with the
//! figures the loader reads from the freshly built image (registers, shared, local, kernarg,
//! sha256).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Arguments of `mhc asm`.
#[derive(clap::Args)]
pub struct Args {
    /// Assemble into a temporary folder and fail, naming each file, if anything differs from
    /// asm/bin or from asm/src/images.rs. Writes nothing.
    #[arg(long)]
    pub check: bool,
    /// After assembling, rewrite the `expect = {...}` line of every variant in asm/catalogue.toml
    /// with the resources and sha256 the loader reads from its image.
    #[arg(long, conflicts_with = "check")]
    pub update_catalogue: bool,
    /// Repository root (default: the nearest parent folder holding asm/ and loader/).
    #[arg(long)]
    pub root: Option<PathBuf>,
}

const PTXAS_VERSION: &str = "V12.9.86";
const PTXAS_DEFAULT: &str = ".tools/nvcc-12.9.86/nvidia/cuda_nvcc/bin/ptxas";
const LLVM_MC: &str = "llvm-mc-19";
const LD_LLD: &str = "ld.lld-19";
const INSTALL_HINT: &str = "install the pinned tools with `bash tools/install-asm-tools.sh` \
    (apt-get install llvm-19 lld-19; pip install --target .tools/nvcc-12.9.86 nvidia-cuda-nvcc-cu12==12.9.86)";
const TABLE: &str = "asm/src/images.rs";

/// One source family: where its sources live, what they become and how.
struct Family {
    src_dir: &'static str,
    ext: &'static str,
    out_dir: &'static str,
    out_ext: &'static str,
    tool: Tool,
}

#[derive(Clone, Copy)]
enum Tool {
    Ptxas(&'static str),
    LlvmMc(&'static str),
}

const FAMILIES: [Family; 3] = [
    Family {
        src_dir: "asm/ptx/sm90",
        ext: "ptx",
        out_dir: "asm/bin/sm90",
        out_ext: "cubin",
        tool: Tool::Ptxas("sm_90a"),
    },
    Family {
        src_dir: "asm/ptx/sm100",
        ext: "ptx",
        out_dir: "asm/bin/sm100",
        out_ext: "cubin",
        tool: Tool::Ptxas("sm_100a"),
    },
    Family {
        src_dir: "asm/gcn/gfx942",
        ext: "s",
        out_dir: "asm/bin/gfx942",
        out_ext: "hsaco",
        tool: Tool::LlvmMc("gfx942"),
    },
];

pub fn main(args: Args) -> Result<(), String> {
    let root = match args.root {
        Some(r) => r,
        None => find_root()?,
    };
    let jobs = collect_jobs(&root)?;
    let tools = Tools::find(&root, &jobs)?;

    let stage = TempDir::new()?;
    let mut built: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut failures = Vec::new();
    for job in &jobs {
        match tools.assemble(job, &stage.0) {
            Ok(bytes) => {
                built.insert(job.out_rel.clone(), bytes);
            }
            Err(e) => failures.push(format!("{}: {e}", job.src_rel)),
        }
    }
    if !failures.is_empty() {
        return Err(format!("assembly failed:\n{}", failures.join("\n")));
    }
    let table = embedded_table(built.keys());

    if args.check {
        let problems = check(&root, &built, &table)?;
        if problems.is_empty() {
            println!("mhc asm --check: {} code objects and {TABLE} match their sources", built.len());
            return Ok(());
        }
        return Err(format!(
            "asm/bin is not what the sources assemble to (run `mhc asm` and commit):\n  {}",
            problems.join("\n  ")
        ));
    }

    let changed = write_outputs(&root, &built, &table)?;
    println!(
        "mhc asm: {} code objects assembled; {}",
        built.len(),
        if changed.is_empty() {
            "asm/bin and the table were up to date".to_string()
        } else {
            format!("updated {}", changed.join(", "))
        }
    );
    if args.update_catalogue {
        update_catalogue(&root, &built)?;
    }
    Ok(())
}

/// The nearest parent of the working directory that holds `asm/` and `loader/`.
fn find_root() -> Result<PathBuf, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    cwd.ancestors()
        .find(|d| d.join("asm").is_dir() && d.join("loader").is_dir())
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("no repository root (a folder with asm/ and loader/) above {}", cwd.display()))
}

struct Job {
    src: PathBuf,
    src_rel: String,
    out_rel: String,
    tool: Tool,
}

fn collect_jobs(root: &Path) -> Result<Vec<Job>, String> {
    let mut jobs = Vec::new();
    for f in &FAMILIES {
        let dir = root.join(f.src_dir);
        if !dir.is_dir() {
            continue;
        }
        let mut entries: Vec<PathBuf> = fs::read_dir(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().and_then(|e| e.to_str()) == Some(f.ext))
            .collect();
        entries.sort();
        for src in entries {
            let stem =
                src.file_stem().and_then(|s| s.to_str()).ok_or_else(|| format!("{}: odd file name", src.display()))?;
            if !stem.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return Err(format!("{}: kernel file names use [A-Za-z0-9_-] only", src.display()));
            }
            jobs.push(Job {
                src_rel: format!("{}/{stem}.{}", f.src_dir, f.ext),
                out_rel: format!("{}/{stem}.{}", f.out_dir, f.out_ext),
                src,
                tool: f.tool,
            });
        }
    }
    Ok(jobs)
}

/// The pinned tools, checked once; only the ones the present sources need are required.
struct Tools {
    ptxas: Option<PathBuf>,
    llvm: bool,
}

fn tool_version(program: &Path) -> Result<String, String> {
    let out = Command::new(program)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {}: {e}; {INSTALL_HINT}", program.display()))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

impl Tools {
    fn find(root: &Path, jobs: &[Job]) -> Result<Tools, String> {
        let mut tools = Tools { ptxas: None, llvm: false };
        if jobs.iter().any(|j| matches!(j.tool, Tool::Ptxas(_))) {
            let path = std::env::var_os("MHC_PTXAS").map(PathBuf::from).unwrap_or_else(|| root.join(PTXAS_DEFAULT));
            if !path.exists() {
                return Err(format!("ptxas not found at {} (set MHC_PTXAS or {INSTALL_HINT})", path.display()));
            }
            let v = tool_version(&path)?;
            if !v.contains(PTXAS_VERSION) {
                return Err(format!(
                    "{} is not ptxas {PTXAS_VERSION} (it says {:?}); the committed cubins are pinned to it; {INSTALL_HINT}",
                    path.display(),
                    v.lines().last().unwrap_or_default()
                ));
            }
            tools.ptxas = Some(path);
        }
        if jobs.iter().any(|j| matches!(j.tool, Tool::LlvmMc(_))) {
            for (program, needle) in [(LLVM_MC, "LLVM version 19."), (LD_LLD, "LLD 19.")] {
                let v = tool_version(Path::new(program))?;
                if !v.contains(needle) {
                    return Err(format!("{program} is not LLVM 19 ({:?}); {INSTALL_HINT}", v.trim()));
                }
            }
            tools.llvm = true;
        }
        Ok(tools)
    }

    fn assemble(&self, job: &Job, stage: &Path) -> Result<Vec<u8>, String> {
        let work = stage.join("work");
        fs::create_dir_all(&work).map_err(|e| e.to_string())?;
        let out = work.join("out.bin");
        let _ = fs::remove_file(&out);
        match job.tool {
            Tool::Ptxas(arch) => {
                let ptxas = self.ptxas.as_ref().ok_or("ptxas missing")?;
                run(Command::new(ptxas).arg(format!("-arch={arch}")).arg("-o").arg(&out).arg(&job.src))?;
            }
            Tool::LlvmMc(cpu) => {
                if !self.llvm {
                    return Err("llvm-mc-19 missing".into());
                }
                let obj = work.join("out.o");
                // `.include` files (shared macros, `*.inc`) are found next to the source.
                let include_dir = job.src.parent().ok_or("a source file without a folder")?;
                run(Command::new(LLVM_MC)
                    .args(["-triple=amdgcn-amd-amdhsa", &format!("-mcpu={cpu}"), "--amdhsa-code-object-version=5"])
                    .args(["-filetype=obj", "-o"])
                    .arg(&obj)
                    .arg("-I")
                    .arg(include_dir)
                    .arg(&job.src))?;
                run(Command::new(LD_LLD).arg("-shared").arg("-o").arg(&out).arg(&obj))?;
            }
        }
        let bytes = fs::read(&out).map_err(|e| format!("no output: {e}"))?;
        // Refuse to commit an image the loader cannot read: better here than at run time.
        mhc_loader::parse(&bytes).map_err(|e| format!("the loader rejects the assembled image: {e}"))?;
        Ok(bytes)
    }
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("cannot run {:?}: {e}; {INSTALL_HINT}", cmd.get_program()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{:?} failed ({}):\n{}{}",
        cmd.get_program(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// The generated `asm/src/images.rs` for these `asm/bin` paths.
fn embedded_table<'a>(paths: impl Iterator<Item = &'a String>) -> String {
    let mut s = String::from(
        "// @generated by `mhc asm` from the files under asm/bin. Do not edit; rerun `mhc asm`.\n\n\
         use crate::EmbeddedImage;\n\n\
         /// Every file under `asm/bin`, sorted by path (one line each: rustfmt is told to leave it).\n\
         #[rustfmt::skip]\n",
    );
    let paths: Vec<_> = paths.collect();
    if paths.is_empty() {
        s.push_str("pub static IMAGES: &[EmbeddedImage] = &[];\n");
        return s;
    }
    s.push_str("pub static IMAGES: &[EmbeddedImage] = &[\n");
    for p in paths {
        let in_crate = p.strip_prefix("asm/").unwrap_or(p);
        s.push_str(&format!("    EmbeddedImage {{ path: \"{p}\", bytes: include_bytes!(\"../{in_crate}\") }},\n"));
    }
    s.push_str("];\n");
    s
}

/// Every file under asm/bin, as paths relative to the root.
fn existing_outputs(root: &Path) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let bin = root.join("asm/bin");
    if !bin.is_dir() {
        return Ok(out);
    }
    let mut stack = vec![bin];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let p = entry.map_err(|e| e.to_string())?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().and_then(|n| n.to_str()) != Some(".gitkeep") {
                out.push(p.strip_prefix(root).map_err(|e| e.to_string())?.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    Ok(out)
}

fn check(root: &Path, built: &BTreeMap<String, Vec<u8>>, table: &str) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    for (rel, bytes) in built {
        match fs::read(root.join(rel)) {
            Ok(old) if &old == bytes => {}
            Ok(_) => problems.push(format!("{rel}: differs from what its source assembles to")),
            Err(_) => problems.push(format!("{rel}: missing")),
        }
    }
    for rel in existing_outputs(root)? {
        if !built.contains_key(&rel) {
            problems.push(format!("{rel}: extra (no source assembles to it)"));
        }
    }
    match fs::read_to_string(root.join(TABLE)) {
        Ok(old) if old == table => {}
        Ok(_) => problems.push(format!("{TABLE}: differs from the generated table")),
        Err(_) => problems.push(format!("{TABLE}: missing")),
    }
    Ok(problems)
}

/// Writes changed outputs, removes stale ones, regenerates the table; returns what changed.
fn write_outputs(root: &Path, built: &BTreeMap<String, Vec<u8>>, table: &str) -> Result<Vec<String>, String> {
    let mut changed = Vec::new();
    for rel in existing_outputs(root)? {
        if !built.contains_key(&rel) {
            fs::remove_file(root.join(&rel)).map_err(|e| format!("{rel}: {e}"))?;
            changed.push(format!("removed {rel}"));
        }
    }
    for (rel, bytes) in built {
        let path = root.join(rel);
        if fs::read(&path).ok().as_ref() != Some(bytes) {
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            }
            fs::write(&path, bytes).map_err(|e| format!("{rel}: {e}"))?;
            changed.push(rel.clone());
        }
    }
    if fs::read_to_string(root.join(TABLE)).ok().as_deref() != Some(table) {
        fs::write(root.join(TABLE), table).map_err(|e| format!("{TABLE}: {e}"))?;
        changed.push(TABLE.to_string());
    }
    Ok(changed)
}

/// Rewrites the `expect = {...}` lines of asm/catalogue.toml from the built images.
fn update_catalogue(root: &Path, built: &BTreeMap<String, Vec<u8>>) -> Result<(), String> {
    let path = root.join(mhc_loader::catalogue::CATALOGUE_PATH);
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let images: BTreeMap<&str, &[u8]> = built.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
    let (new_text, report) = mhc_loader::catalogue::rewrite_expectations(&text, |file| images.get(file).copied())
        .map_err(|e| e.to_string())?;
    if new_text != text {
        fs::write(&path, &new_text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    for line in report {
        println!("  {line}");
    }
    println!(
        "mhc asm: {} {}",
        mhc_loader::catalogue::CATALOGUE_PATH,
        if new_text == text { "was up to date" } else { "updated" }
    );
    Ok(())
}

/// A folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, String> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("mhc-asm-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
