//! The lowering's options ([`LowerOptions`]): transfer elision, the keep limit, the
//! device memory cap and where its default comes from ([`DefaultCap`]), the eviction
//! policy and prefetch ([`Prefetch`]).

/// The default of [`LowerOptions::keep_limit_bytes`]: 256 MiB.
pub const DEFAULT_KEEP_LIMIT: u64 = 256 << 20;

/// Where the device memory cap comes from when none is given in bytes
/// ([`LowerOptions::device_memory`] `None`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DefaultCap {
    /// The device's free memory, taken when the plan is bound to a plugin
    /// ([`crate::Plan::for_plugin`]) that reports it
    /// ([`crate::plugin::Plugin::memory_info`]: on CUDA `cuMemGetInfo`'s free bytes, the
    /// analogue of StarPU's `STARPU_LIMIT_CUDA_MEM`, which bounds what StarPU allocates
    /// per GPU), less what the plugin may hold beyond the cap's live bytes
    /// ([`crate::plugin::MemoryInfo::reserve`]: CUDA's block cache of freed blocks);
    /// the least over the devices the program uses ([`LowerOptions::resolve_cap`]). A
    /// plugin that reports none (the host plugin without a cap of its own, the null
    /// plugin) leaves the plan unlimited, as does a plan never bound. The default.
    #[default]
    DeviceFree,
    /// No cap unless [`LowerOptions::device_memory`] gives one.
    Unlimited,
}

/// When H2D copies are prefetched: issued ahead of need on a copy stream
/// ([`LowerOptions::prefetch`]; `lower/prefetch.rs` says which copies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Prefetch {
    /// Never (the CLI's `--no-prefetch`).
    Off,
    /// Only when the graph is lowered under a device memory cap that binds: the lowering
    /// evicted a kept copy to keep within it ([`super::OpGraph::evictions`]), or the
    /// program's allocations on a device add up to more than the cap, so allocs wait for
    /// frees to make their room (memory edges of the cap's claims). The default. Under a cap that does not bind (on CUDA the cap defaults to the
    /// device's free memory, [`DefaultCap::DeviceFree`], so that is most CUDA runs) the
    /// copy stream costs and gains nothing: on the H200 (benches/README-gpu.md run 23)
    /// the blocked matmul of `bench dag` (n 256, bs 16, 768 KiB under a 140 GB cap) ran
    /// 3% slower on 4 streams and 17% slower on 1 stream with prefetch, its copy stream
    /// adding 871 events on 1 stream; where the cap binds (tiled Cholesky under a quarter
    /// of its matrix) the copies of kept tiles overlap compute.
    #[default]
    CapBinds,
    /// Under any device memory cap, binding or not (the default before the rule above):
    /// moving an `Alloc` and its H2D earlier can make a real device hold more at once
    /// than the mapping rules' order would, and only a cap bounds that (its memory edges
    /// order each alloc after the frees that make its room, whatever stream it runs on).
    UnderCap,
    /// Also without a cap (the CLI's `--prefetch`).
    On,
}

/// Options of the lowering ([`super::lower_with`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowerOptions {
    /// Elide copies no one can observe (the module docs of `lower::elide`: kept device
    /// copies, deferred D2H); off gives exactly the copies the mapping rules name. Has
    /// no effect on programs of several devices. Default **on**; `elide: false` (the
    /// CLI's `--no-elide`) issues every copy of OpenMP's mapping rules as libomptarget
    /// does, for comparison and for tests of those rules.
    pub elide: bool,
    /// Without a device memory cap: at most this many bytes of kept copies at once
    /// (evicted in [`LowerOptions::eviction`]'s order when a copy to keep would go
    /// over), so a program without a cap holds at most this much more than the mapping
    /// rules allocate. Default [`DEFAULT_KEEP_LIMIT`]. Ignored under a cap
    /// ([`LowerOptions::device_memory`]), which bounds all live device bytes, kept
    /// copies included: they are evicted when an `Alloc` needs their room.
    pub keep_limit_bytes: u64,
    /// The device memory cap, bytes per device: the live device bytes stay within it at
    /// every point any execution of the schedule can reach (`lower/cap.rs`; the CLI's
    /// `--device-memory`). `None` (the default): none given, so [`LowerOptions::default_cap`]
    /// decides once the plan is bound to a plugin; unlimited until then.
    pub device_memory: Option<u64>,
    /// Where the cap comes from when `device_memory` is `None` ([`DefaultCap`]; default
    /// the device's free memory where the plugin reports it: CUDA).
    pub default_cap: DefaultCap,
    /// Which kept copy to evict first ([`super::EvictionPolicy`]; the CLI's
    /// `--eviction`). Default Belady (furthest next use).
    pub eviction: super::EvictionPolicy,
    /// When H2D copies are issued ahead of need on a copy stream ([`Prefetch`]; default
    /// under a cap only).
    pub prefetch: Prefetch,
}

impl LowerOptions {
    /// The default options with elision on (the same as [`LowerOptions::default`]).
    pub fn elided() -> LowerOptions {
        LowerOptions {
            elide: true,
            ..LowerOptions::default()
        }
    }

    /// The default options with elision off: every copy the mapping rules name
    /// (`--no-elide`).
    pub fn no_elide() -> LowerOptions {
        LowerOptions {
            elide: false,
            ..LowerOptions::default()
        }
    }

    /// These options with the default cap ([`DefaultCap::DeviceFree`]) resolved:
    /// `free[d]` is device `d`'s free memory in bytes as its plugin reports it (`None`:
    /// the plugin sets no limit), `reserve` the bytes per device kept out of the cap (the
    /// plugin's block cache of freed memory). The cap is the least `free[d] − reserve`
    /// (at least 1 byte) over the devices; unchanged when a cap is given already, the
    /// default is [`DefaultCap::Unlimited`], `free` is empty, or any device reports
    /// `None`. `O(devices)`.
    pub fn resolve_cap(&self, free: &[Option<u64>], reserve: u64) -> LowerOptions {
        if self.device_memory.is_some() || self.default_cap == DefaultCap::Unlimited {
            return self.clone();
        }
        let least = free
            .iter()
            .try_fold(u64::MAX, |m, f| f.map(|f| m.min(f)))
            .filter(|_| !free.is_empty());
        LowerOptions {
            device_memory: least.map(|f| f.saturating_sub(reserve).max(1)),
            ..self.clone()
        }
    }

    /// Whether the lowering prefetches under these options, for a graph lowered under
    /// `cap` that `binds` (it evicted, or an alloc waits for a free: [`Prefetch::CapBinds`]).
    pub fn prefetches(&self, cap: Option<u64>, binds: bool) -> bool {
        match self.prefetch {
            Prefetch::Off => false,
            Prefetch::CapBinds => cap.is_some() && binds,
            Prefetch::UnderCap => cap.is_some(),
            Prefetch::On => true,
        }
    }
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions {
            elide: true,
            keep_limit_bytes: DEFAULT_KEEP_LIMIT,
            device_memory: None,
            default_cap: DefaultCap::default(),
            eviction: super::EvictionPolicy::default(),
            prefetch: Prefetch::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn the_default_cap_is_the_least_free_memory_less_the_reserve() {
        let o = LowerOptions::default();
        let r = o.resolve_cap(&[Some(139 * GIB)], GIB);
        assert_eq!(r.device_memory, Some(138 * GIB));
        assert_eq!(
            (r.elide, r.eviction, r.prefetch),
            (o.elide, o.eviction, o.prefetch)
        );
        // Several devices: the least.
        let r = o.resolve_cap(&[Some(80 * GIB), Some(12 * GIB), Some(40 * GIB)], 0);
        assert_eq!(r.device_memory, Some(12 * GIB));
        // Less free than the reserve: 1 byte, so every region is refused by name.
        assert_eq!(o.resolve_cap(&[Some(5)], GIB).device_memory, Some(1));
    }

    #[test]
    fn a_given_cap_an_unlimited_default_or_no_figure_leaves_the_options() {
        let given = LowerOptions {
            device_memory: Some(4096),
            ..LowerOptions::default()
        };
        assert_eq!(given.resolve_cap(&[Some(GIB)], 0), given);
        let unlimited = LowerOptions {
            default_cap: DefaultCap::Unlimited,
            ..LowerOptions::default()
        };
        assert_eq!(unlimited.resolve_cap(&[Some(GIB)], 0), unlimited);
        let o = LowerOptions::default();
        assert_eq!(o.resolve_cap(&[], 0), o);
        assert_eq!(o.resolve_cap(&[Some(GIB), None], 0), o);
    }

    #[test]
    fn prefetch_is_on_by_default_only_where_the_cap_binds() {
        let o = LowerOptions::default();
        assert_eq!(o.prefetch, Prefetch::CapBinds);
        assert!(o.prefetches(Some(1), true));
        assert!(!o.prefetches(Some(1), false) && !o.prefetches(None, false));
        let under = LowerOptions {
            prefetch: Prefetch::UnderCap,
            ..o.clone()
        };
        assert!(under.prefetches(Some(1), false) && !under.prefetches(None, false));
        let on = LowerOptions {
            prefetch: Prefetch::On,
            ..o.clone()
        };
        assert!(on.prefetches(None, false));
        let off = LowerOptions {
            prefetch: Prefetch::Off,
            ..o
        };
        assert!(!off.prefetches(Some(1), true));
    }
}
