//! Binding a plan's default device memory cap to a plugin ([`Plan::for_plugin`]; issue
//! 28 point 2: "default the device's free memory on CUDA, unlimited on the host plugin
//! unless set").

use crate::error::Error;
use crate::exec::ExecError;
use crate::plugin::Plugin;
use crate::Plan;

impl Plan {
    /// This plan with its default device memory cap resolved for `plugin`
    /// ([`crate::lower::DefaultCap`]): where the plan was lowered without a cap in bytes
    /// and with [`crate::lower::DefaultCap::DeviceFree`] (the default), each device the
    /// program uses is asked its memory ([`Plugin::memory_info`]: CUDA `cuMemGetInfo`),
    /// and the program is lowered again under the least free memory less the plugin's
    /// reserve ([`crate::plugin::MemoryInfo::reserve`]: CUDA's block cache of freed blocks;
    /// [`crate::lower::LowerOptions::resolve_cap`]), so kept copies are
    /// bounded by the device, not by the 256 MiB keep limit, and prefetch is on where
    /// that cap binds ([`crate::lower::Prefetch::CapBinds`]). Returns a copy of `self` where nothing
    /// changes: a cap given, [`crate::lower::DefaultCap::Unlimited`], or a plugin that
    /// reports no figure (the host plugin without a cap of its own, the null plugin).
    /// Call it once, before the runs: the cap is the free memory at that moment, fixed
    /// in the plan (a [`Session`](crate::Session) runs the plan it is given).
    ///
    /// Errors: [`Error::Exec`] with [`ExecError::Step`] naming the failing
    /// `memory info` call; as [`Plan::relower`] (a construct over the resolved cap is
    /// [`crate::lower::LowerError::DeviceMemory`], naming it and the bytes).
    ///
    /// Complexity: one `memory_info` call per device, then a lowering, schedule and proof
    /// where the cap changes.
    pub fn for_plugin(&self, plugin: &dyn Plugin) -> Result<Plan, Error> {
        let opts = self.lower_options();
        if opts.device_memory.is_some() || opts.default_cap == crate::lower::DefaultCap::Unlimited {
            return Ok(self.clone());
        }
        let (mut free, mut reserve) = (Vec::new(), 0);
        for d in 0..self.graph().devices.max(1) {
            let info = plugin.memory_info(d).map_err(|source| Error::Exec {
                name: self.name().to_string(),
                error: Box::new(ExecError::Step {
                    what: format!("memory info of device {d}"),
                    source,
                }),
                at: None,
            })?;
            free.push(info.map(|m| m.free));
            reserve = info.map_or(reserve, |m| reserve.max(m.reserve));
        }
        self.relower(&opts.resolve_cap(&free, reserve))
    }
}
