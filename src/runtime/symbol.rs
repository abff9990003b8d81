//! What a symbol of a loaded shared library is: a user kernel's `symbol` must name a
//! function, or calling it jumps into data (SIGSEGV, or worse). `dlsym` gives only an
//! address, so the dynamic linker is asked what lies there:
//!
//! 1. `dladdr1(addr, RTLD_DL_SYMENT)` (glibc) finds the dynamic symbol at `addr` with its
//!    ELF symbol entry: `STT_FUNC` and `STT_GNU_IFUNC` are functions; `STT_OBJECT`,
//!    `STT_COMMON` and `STT_TLS` are data and refused, named by their type.
//! 2. Otherwise (a symbol without a type, as hand-written assembly gives, or an address
//!    no dynamic symbol starts at, as an IFUNC's resolved body may be), the address must
//!    lie in an executable `PT_LOAD` segment of a loaded object (`dl_iterate_phdr`);
//!    else it is refused.
//!
//! On other systems nothing is checked ([`check_function`] returns `Ok`): the kernel's
//! declaration stays the only guard there. Sources: the ELF gABI symbol table
//! (`st_info` types), glibc's `dladdr1(3)` and `dl_iterate_phdr(3)`.

use std::ffi::c_void;

/// Why an address is not a function: what lies there (`"a data object (STT_OBJECT)"`).
pub(crate) type NotAFunction = &'static str;

/// Checks that `addr`, the address `dlsym` gave for a symbol, is a function's.
///
/// Errors: what lies there instead. `O(loaded objects · segments)` at worst.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn check_function(addr: *const c_void) -> Result<(), NotAFunction> {
    const RTLD_DL_SYMENT: libc::c_int = 1;
    const STT_OBJECT: u8 = 1;
    const STT_FUNC: u8 = 2;
    const STT_COMMON: u8 = 5;
    const STT_TLS: u8 = 6;
    const STT_GNU_IFUNC: u8 = 10;
    if addr.is_null() {
        return Err("a null address");
    }
    // SAFETY: `Dl_info` is plain data (pointers and integers); all-zero is a valid value
    // that dladdr1 overwrites.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let mut entry: *mut c_void = std::ptr::null_mut();
    // SAFETY: dladdr1 only reads `addr` as a number and writes `info` and `entry`, both
    // valid for writes; with RTLD_DL_SYMENT `entry` receives a pointer to the symbol's
    // ELF entry inside the loaded object, valid while it stays loaded (the caller holds
    // the library).
    let found = unsafe { libc::dladdr1(addr, &mut info, &mut entry, RTLD_DL_SYMENT) };
    if found != 0 && !entry.is_null() && std::ptr::eq(info.dli_saddr, addr) {
        #[cfg(target_pointer_width = "64")]
        type Sym = libc::Elf64_Sym;
        #[cfg(not(target_pointer_width = "64"))]
        type Sym = libc::Elf32_Sym;
        // SAFETY: with RTLD_DL_SYMENT, a non-null `entry` points at the ElfW(Sym) of the
        // symbol found (dladdr1(3)); it is only read.
        let st_info = unsafe { (*(entry as *const Sym)).st_info };
        match st_info & 0xf {
            STT_FUNC | STT_GNU_IFUNC => return Ok(()),
            STT_OBJECT => return Err("a data object (ELF symbol type STT_OBJECT)"),
            STT_COMMON => return Err("a common data object (STT_COMMON)"),
            STT_TLS => return Err("thread-local data (STT_TLS)"),
            _ => {} // no type: decided by the segment below
        }
    }
    if in_executable_segment(addr) {
        Ok(())
    } else {
        Err("not in executable code (no function symbol there, in no executable segment)")
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn check_function(_addr: *const c_void) -> Result<(), NotAFunction> {
    Ok(())
}

/// Whether `addr` lies in a `PT_LOAD` segment with `PF_X` of some loaded object.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn in_executable_segment(addr: *const c_void) -> bool {
    struct Search {
        addr: usize,
        found: bool,
    }
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Search` passed to dl_iterate_phdr below, alive for the
        // whole iteration and not otherwise borrowed meanwhile; `info` points at a valid
        // dl_phdr_info whose `dlpi_phdr` holds `dlpi_phnum` headers (dl_iterate_phdr(3)).
        unsafe {
            let search = &mut *(data as *mut Search);
            let info = &*info;
            let headers = std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum));
            for h in headers {
                if h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_X != 0 {
                    let start = (info.dlpi_addr as usize).wrapping_add(h.p_vaddr as usize);
                    let end = start.wrapping_add(h.p_memsz as usize);
                    if (start..end).contains(&search.addr) {
                        search.found = true;
                        return 1; // stop
                    }
                }
            }
        }
        0
    }
    let mut search = Search {
        addr: addr as usize,
        found: false,
    };
    // SAFETY: `visit` only reads the headers it is given and writes `search`, which
    // outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut search as *mut Search).cast()) };
    search.found
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    static OFFLOAD_SCHED_TEST_DATA: [u64; 4] = [1, 2, 3, 4];

    #[test]
    fn functions_pass_and_data_is_refused() {
        let f = functions_pass_and_data_is_refused as fn() as *const c_void;
        assert_eq!(check_function(f), Ok(()));
        let libc_fn = libc::strlen as *const c_void;
        assert_eq!(check_function(libc_fn), Ok(()));
        let data = OFFLOAD_SCHED_TEST_DATA.as_ptr() as *const c_void;
        let e = check_function(data).unwrap_err();
        assert!(e.contains("data") || e.contains("executable"), "{e}");
        let heap = Box::new(7u64);
        assert!(check_function(&*heap as *const u64 as *const c_void).is_err());
        assert!(check_function(std::ptr::null()).is_err());
    }
}
