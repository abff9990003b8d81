//! Hand-built graphs and schedules for the views' unit tests.

use crate::lower::{
    AllocId, DeviceAlloc, KernelCall, Op, OpGraph, OpKind, Region, RegionId, RegionKind,
};
use crate::model::{Buffer, ElemType, Init, LaunchShape, Section};
use crate::schedule::{Schedule, Step, StreamId, StreamInfo, SyncPolicy};

/// `p` = alloc + kernel on s0; `c` = kernel on s1 after p's kernel; `end` on the host.
pub(super) fn hand_graph() -> OpGraph {
    let y = Buffer {
        name: "y".into(),
        ty: ElemType::F32,
        len: 256,
        init: Init::Zeros,
    };
    let mut g = OpGraph::new("hand", vec![y], Vec::new(), 1);
    let sec = Section::new(crate::model::BufferId(0), 0, 256);
    g.allocs.push(DeviceAlloc {
        zero: false,
        section: sec,
        device: 0,
        bytes: 1024,
    });
    let call = |k: &str| {
        OpKind::Kernel(KernelCall {
            kernel: k.into(),
            ty: ElemType::F32,
            args: Vec::new(),
            launch: LaunchShape {
                teams: 1,
                threads: 256,
            },
        })
    };
    let op = |kind, r| Op {
        kind,
        region: RegionId(r),
        device: 0,
    };
    let a0 = g.push_op(op(OpKind::Alloc { alloc: AllocId(0) }, 0), vec![]);
    let k1 = g.push_op(op(call("fill"), 0), vec![a0]);
    let k2 = g.push_op(op(call("increment"), 1), vec![k1]);
    g.push_op(op(OpKind::End, 2), vec![k2]);
    for (name, kind, ops) in [
        ("p", RegionKind::Target, 0..2),
        ("c \"quoted\"", RegionKind::Target, 2..3),
        ("end", RegionKind::End, 3..4),
    ] {
        g.regions.push(Region {
            name: name.into(),
            kind,
            nowait: true,
            device: 0,
            priority: 0,
            lane: None,
            ops,
            span: None,
        });
    }
    g
}

pub(super) fn hand_schedule(steps: Vec<Step>) -> Schedule {
    Schedule {
        name: "hand".into(),
        policy: SyncPolicy::Minimal,
        streams: vec![
            StreamInfo {
                device: 0,
                high_priority: false
            };
            2
        ],
        op_stream: vec![
            Some(StreamId(0)),
            Some(StreamId(0)),
            Some(StreamId(1)),
            None,
        ],
        steps,
        events: 1,
        host_lanes: 1,
        op_lane: vec![0; 4],
        text: Default::default(),
    }
}
