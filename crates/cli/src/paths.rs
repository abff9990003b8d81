//! Output paths that name the input file: `dot -o`, `run --trace` and `import -o` refuse
//! them before anything is written (the output would replace the graph or workflow).

use std::path::Path;

/// True if `a` and `b` name the same existing regular file, through symbolic links and
/// hard links: the same device and inode on Unix, the same canonical path elsewhere.
/// False when either does not exist or is not a regular file (a character device or a
/// FIFO given as both is written through, not replaced).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) else {
        return false;
    };
    if !(x.is_file() && y.is_file()) {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        x.dev() == y.dev() && x.ino() == y.ino()
    }
    #[cfg(not(unix))]
    {
        matches!((a.canonicalize(), b.canonicalize()), (Ok(p), Ok(q)) if p == q)
    }
}

/// Errors with `error: OPTION OUTPUT is the input file INPUT: ...` when `output` is the
/// same file as `input` ([`same_file`]).
pub fn refuse_input(input: &Path, output: &Path, option: &str) -> Result<(), String> {
    if same_file(input, output) {
        return Err(format!(
            "error: {option} {} is the input file {}: refusing to overwrite it (choose another output path)",
            output.display(),
            input.display()
        ));
    }
    Ok(())
}
