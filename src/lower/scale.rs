//! Scaling the built-in `spin` kernel's durations in an op graph (stress runs of
//! recorded workflows: `run --spin-scale`, `bench dag --spin-scale`).

use super::{KernelArg, OpGraph, OpId, OpKind};

/// Multiplies the `us` argument of every built-in `spin` launch by `factor` (`run
/// --spin-scale`, `bench dag --spin-scale`): the dependency structure is unchanged, the
/// waiting shrinks. A graph declaring its own kernel named `spin` is left alone.
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
            if let OpKind::Kernel(call) = &op.kind {
                if call.kernel == "spin" {
                    for (j, a) in call.args.iter().enumerate() {
                        if let KernelArg::Scalar(Scalar::F64(us)) = a {
                            v.push((i, j, *us));
                        }
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
        if let OpKind::Kernel(call) = &mut graph.ops[i].kind {
            call.args[j] = KernelArg::Scalar(Scalar::F64(us * factor));
        }
    }
    Ok(())
}
