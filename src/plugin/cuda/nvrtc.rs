//! A minimal NVRTC binding, loaded at run time with libloading.
//!
//! cudarc's own NVRTC loader resolves every symbol of the CUDA version it was built for
//! and panics on the first one missing, and it looks only for `libnvrtc.so.{12,11,10,1}`;
//! a machine with a newer toolkit (CUDA 13: `libnvrtc.so.13`, where some 12.x entry
//! points are gone) would abort the process. This module asks for the nine entry points
//! it uses, by name, from the first NVRTC library that opens, and returns errors.
//!
//! Search order: `$OFFLOAD_NVRTC` (a file path), then the names `libnvrtc.so`,
//! `libnvrtc.so.13`, `libnvrtc.so.12`, `libnvrtc.so.11.2` through the dynamic loader,
//! then the same names under `$CUDA_HOME/lib64`, `$CUDA_PATH/lib64`,
//! `/usr/local/cuda/lib64` and `/usr/local/cuda/targets/x86_64-linux/lib`.

use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::OnceLock;

type Prog = *mut c_void;
type Res = c_int;

struct Api {
    _lib: Library,
    path: String,
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Res,
    create: unsafe extern "C" fn(
        *mut Prog,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Res,
    compile: unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> Res,
    log_size: unsafe extern "C" fn(Prog, *mut usize) -> Res,
    log: unsafe extern "C" fn(Prog, *mut c_char) -> Res,
    cubin_size: unsafe extern "C" fn(Prog, *mut usize) -> Res,
    cubin: unsafe extern "C" fn(Prog, *mut c_char) -> Res,
    destroy: unsafe extern "C" fn(*mut Prog) -> Res,
    error_string: unsafe extern "C" fn(Res) -> *const c_char,
}

fn candidates() -> Vec<PathBuf> {
    let names = [
        "libnvrtc.so",
        "libnvrtc.so.13",
        "libnvrtc.so.12",
        "libnvrtc.so.11.2",
    ];
    let mut v = Vec::new();
    if let Some(p) = std::env::var_os("OFFLOAD_NVRTC") {
        v.push(PathBuf::from(p));
    }
    v.extend(names.iter().map(PathBuf::from));
    let mut dirs: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|k| std::env::var_os(k).map(|d| PathBuf::from(d).join("lib64")))
        .collect();
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs.push(PathBuf::from("/usr/local/cuda/targets/x86_64-linux/lib"));
    for d in dirs {
        v.extend(names.iter().map(|n| d.join(n)));
    }
    v
}

fn load() -> Result<Api, String> {
    let mut tried = Vec::new();
    for path in candidates() {
        // SAFETY: loading NVRTC runs its initialisers; it is the library we mean to use.
        let lib = match unsafe { Library::new(&path) } {
            Ok(l) => l,
            Err(_) => {
                tried.push(path.display().to_string());
                continue;
            }
        };
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is NVRTC's documented C entry point with the type of
                // the field it is stored in (nvrtc.h); the library is kept in `_lib`.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("{}: {}: {e}", path.display(), $name))?
            };
        }
        let api = Api {
            version: sym!("nvrtcVersion"),
            create: sym!("nvrtcCreateProgram"),
            compile: sym!("nvrtcCompileProgram"),
            log_size: sym!("nvrtcGetProgramLogSize"),
            log: sym!("nvrtcGetProgramLog"),
            cubin_size: sym!("nvrtcGetCUBINSize"),
            cubin: sym!("nvrtcGetCUBIN"),
            destroy: sym!("nvrtcDestroyProgram"),
            error_string: sym!("nvrtcGetErrorString"),
            path: path.display().to_string(),
            _lib: lib,
        };
        return Ok(api);
    }
    Err(format!(
        "no NVRTC library found (tried {}; set OFFLOAD_NVRTC to its path)",
        tried.join(", ")
    ))
}

fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(|e| e.clone())
}

/// The NVRTC library in use and its version, e.g. `/usr/local/cuda/lib64/libnvrtc.so (13.0)`.
pub fn describe() -> Result<String, String> {
    let a = api()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers.
    unsafe { (a.version)(&mut major, &mut minor) };
    Ok(format!("{} ({major}.{minor})", a.path))
}

fn err_str(a: &Api, r: Res) -> String {
    // SAFETY: nvrtcGetErrorString returns a static NUL-terminated string for any code.
    let p = unsafe { (a.error_string)(r) };
    if p.is_null() {
        format!("NVRTC error {r}")
    } else {
        // SAFETY: non-null static C string (above).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// Compiles CUDA C `src` (named `name` in messages) to a CUBIN for `sm_{major}{minor}`.
/// `options` are extra NVRTC options.
///
/// Errors: NVRTC missing, or the compile failed (with the compiler's log).
pub fn compile_cubin(
    src: &str,
    name: &str,
    major: i32,
    minor: i32,
    options: &[&str],
) -> Result<Vec<u8>, String> {
    let a = api()?;
    let csrc = CString::new(src).map_err(|_| format!("{name}: source contains a NUL byte"))?;
    let cname = CString::new(name).map_err(|_| format!("{name}: name contains a NUL byte"))?;
    let mut prog: Prog = std::ptr::null_mut();
    // SAFETY: valid C strings, no headers (null arrays with count 0), valid out-pointer.
    let r = unsafe {
        (a.create)(
            &mut prog,
            csrc.as_ptr(),
            cname.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(format!("nvrtcCreateProgram: {}", err_str(a, r)));
    }
    let mut opts: Vec<CString> =
        vec![
            CString::new(format!("--gpu-architecture=sm_{major}{minor}"))
                .map_err(|_| "bad architecture".to_string())?,
        ];
    for o in options {
        opts.push(CString::new(*o).map_err(|_| format!("option {o:?} contains a NUL byte"))?);
    }
    let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: `prog` was created above; `ptrs` holds `ptrs.len()` valid C strings.
    let r = unsafe { (a.compile)(prog, ptrs.len() as c_int, ptrs.as_ptr()) };
    let result = if r != 0 {
        let mut n = 0usize;
        // SAFETY: valid program and out-pointer.
        unsafe { (a.log_size)(prog, &mut n) };
        let mut buf = vec![0u8; n.max(1)];
        // SAFETY: `buf` holds the `n` bytes NVRTC said the log needs.
        unsafe { (a.log)(prog, buf.as_mut_ptr() as *mut c_char) };
        let log = String::from_utf8_lossy(&buf);
        Err(format!(
            "nvrtcCompileProgram: {}: {}",
            err_str(a, r),
            log.trim_end_matches('\0').trim()
        ))
    } else {
        let mut n = 0usize;
        // SAFETY: valid program and out-pointer.
        let r = unsafe { (a.cubin_size)(prog, &mut n) };
        if r != 0 {
            Err(format!("nvrtcGetCUBINSize: {}", err_str(a, r)))
        } else {
            let mut buf = vec![0u8; n];
            // SAFETY: `buf` holds the `n` bytes NVRTC said the CUBIN needs.
            let r = unsafe { (a.cubin)(prog, buf.as_mut_ptr() as *mut c_char) };
            if r != 0 {
                Err(format!("nvrtcGetCUBIN: {}", err_str(a, r)))
            } else {
                Ok(buf)
            }
        }
    };
    // SAFETY: `prog` is a live program; destroyed once.
    unsafe { (a.destroy)(&mut prog) };
    result
}
