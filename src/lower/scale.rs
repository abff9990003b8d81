//! Scaling the built-in `spin` kernel's durations in an op graph (stress runs of
//! recorded workflows: `run --spin-scale`, `bench dag --spin-scale`).

use super::{KernelArg, OpGraph, OpId, OpKind};

/// Multiplies the `us` argument of every built-in `spin` call (a target region's launch
/// or a host task's) by `factor` (`run --spin-scale`, `bench dag --spin-scale`): the
/// dependency structure is unchanged, the waiting shrinks. A graph declaring its own kernel named `spin` is left alone.
///
/// Errors: `factor` not finite or negative.
pub fn scale_spins(graph: &mut OpGraph, factor: f64) -> Result<(), String> {
    use crate::model::Scalar;
    if !(factor.is_finite() && factor >= 0.0) {
        return Err(format!(
            "--spin-scale {} must be finite and >= 0",
            crate::model::Num(factor)
        ));
    }
    if graph.kernels.iter().any(|k| k.name == "spin") {
        return Ok(()); // a user kernel named spin is not ours to scale
    }
    // The lowering's one-hour limit holds after scaling too; nothing is changed if a
    // scaled spin would exceed it.
    let max = crate::model::SPIN_MAX_US;
    let spins = |g: &OpGraph| -> Vec<(usize, usize, f64)> {
        let mut v = Vec::new();
        for (i, op) in g.ops.iter().enumerate() {
            if let Some(call) = spin_call(&op.kind) {
                for (j, a) in call.args.iter().enumerate() {
                    if let KernelArg::Scalar(Scalar::F64(us)) = a {
                        v.push((i, j, *us));
                    }
                }
            }
        }
        v
    };
    let found = spins(graph);
    if let Some((i, _, us)) = found.iter().find(|(_, _, us)| us * factor > max) {
        let region = &graph.region_of(OpId(*i as u32)).name;
        return Err(format!(
            "--spin-scale {}: region \"{region}\" would spin {:e} µs, over the {max:e} µs (one hour) a spin may take",
            crate::model::Num(factor),
            us * factor
        ));
    }
    for (i, j, us) in found {
        if let OpKind::Kernel(call)
        | OpKind::HostTask {
            call: Some(call), ..
        } = &mut graph.ops[i].kind
        {
            call.args[j] = KernelArg::Scalar(Scalar::F64(us * factor));
        }
    }
    Ok(())
}

/// The built-in `spin` call of a device kernel op or a host task, if `kind` is one.
fn spin_call(kind: &OpKind) -> Option<&super::KernelCall> {
    match kind {
        OpKind::Kernel(call)
        | OpKind::HostTask {
            call: Some(call), ..
        } if call.kernel == "spin" => Some(call),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Arg, ProgramBuilder, Scalar};

    /// A host task's `spin` is scaled like a target region's.
    #[test]
    fn scales_device_and_host_spins() {
        let mut p = ProgramBuilder::new("spins");
        p.target("dev", "spin").num(2_000.0);
        p.host_kernel("host", "spin", vec![Arg::Number(3_000.0)]);
        let mut g = crate::lower::lower(&p.build()).unwrap();
        scale_spins(&mut g, 0.5).unwrap();
        let us: Vec<f64> = g
            .ops
            .iter()
            .filter_map(|op| spin_call(&op.kind))
            .flat_map(|c| c.args.iter())
            .filter_map(|a| match a {
                KernelArg::Scalar(Scalar::F64(us)) => Some(*us),
                _ => None,
            })
            .collect();
        assert_eq!(us, [1_000.0, 1_500.0]);
    }
}
