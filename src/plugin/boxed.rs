//! `Box<P>` forwards every [`Plugin`] call to `P`.

use super::*;

/// A boxed plugin is a plugin (so `--plugin auto` can pick one at run time and wrappers
/// like [`faulty::FaultyPlugin`] can take it).
impl<P: Plugin + ?Sized> Plugin for Box<P> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn device_count(&self) -> u32 {
        (**self).device_count()
    }
    fn create_streams(&self, device: u32, count: u32) -> Result<Vec<StreamHandle>, PluginError> {
        (**self).create_streams(device, count)
    }
    fn alloc(&self, stream: StreamHandle, bytes: u64) -> Result<DevicePtr, PluginError> {
        (**self).alloc(stream, bytes)
    }
    fn fill_zero(
        &self,
        stream: StreamHandle,
        ptr: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        (**self).fill_zero(stream, ptr, bytes)
    }
    fn free(&self, stream: StreamHandle, ptr: DevicePtr) -> Result<(), PluginError> {
        (**self).free(stream, ptr)
    }
    fn alloc_host(&self, bytes: u64) -> Result<HostPtr, PluginError> {
        (**self).alloc_host(bytes)
    }
    fn free_host(&self, ptr: HostPtr) -> Result<(), PluginError> {
        (**self).free_host(ptr)
    }
    fn submit(
        &self,
        stream: StreamHandle,
        dst: DevicePtr,
        src: HostPtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        (**self).submit(stream, dst, src, bytes)
    }
    fn copy_peer(
        &self,
        stream: StreamHandle,
        dst: DevicePtr,
        dst_device: u32,
        src: DevicePtr,
        src_device: u32,
        bytes: u64,
    ) -> Result<(), PluginError> {
        (**self).copy_peer(stream, dst, dst_device, src, src_device, bytes)
    }
    fn retrieve(
        &self,
        stream: StreamHandle,
        dst: HostPtr,
        src: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        (**self).retrieve(stream, dst, src, bytes)
    }
    fn load_kernel(
        &self,
        device: u32,
        sig: &KernelSig,
        ty: ElemType,
    ) -> Result<KernelHandle, PluginError> {
        (**self).load_kernel(device, sig, ty)
    }
    fn launch(
        &self,
        stream: StreamHandle,
        kernel: KernelHandle,
        args: &[LaunchArg],
        shape: LaunchShape,
    ) -> Result<(), PluginError> {
        (**self).launch(stream, kernel, args, shape)
    }
    fn create_event(&self, device: u32) -> Result<EventHandle, PluginError> {
        (**self).create_event(device)
    }
    fn destroy_event(&self, event: EventHandle) -> Result<(), PluginError> {
        (**self).destroy_event(event)
    }
    fn record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        (**self).record_event(stream, event)
    }
    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        (**self).wait_event(stream, event)
    }
    fn synchronize(&self, stream: StreamHandle) -> Result<(), PluginError> {
        (**self).synchronize(stream)
    }
    fn register_host(&self, ptr: HostPtr, bytes: u64) -> Result<bool, PluginError> {
        (**self).register_host(ptr, bytes)
    }
    fn query(&self, stream: StreamHandle) -> Result<bool, PluginError> {
        (**self).query(stream)
    }
    fn unregister_host(&self, ptr: HostPtr) -> Result<(), PluginError> {
        (**self).unregister_host(ptr)
    }
    fn synchronize_event(&self, event: EventHandle) -> Result<(), PluginError> {
        (**self).synchronize_event(event)
    }
    fn drain_timings(&self) -> Vec<Timing> {
        (**self).drain_timings()
    }
    fn next_seq(&self, stream: StreamHandle) -> u64 {
        (**self).next_seq(stream)
    }
    fn parallel_issue(&self) -> bool {
        (**self).parallel_issue()
    }
    fn graph_instantiate(&self, desc: &GraphDesc) -> Result<Option<GraphHandle>, PluginError> {
        (**self).graph_instantiate(desc)
    }
    fn graph_edges(&self, graph: GraphHandle) -> Result<Vec<(u32, u32)>, PluginError> {
        (**self).graph_edges(graph)
    }
    fn graph_set_host(
        &self,
        graph: GraphHandle,
        node: u32,
        host: HostPtr,
    ) -> Result<(), PluginError> {
        (**self).graph_set_host(graph, node, host)
    }
    fn graph_launch(&self, graph: GraphHandle, stream: StreamHandle) -> Result<(), PluginError> {
        (**self).graph_launch(graph, stream)
    }
    fn graph_destroy(&self, graph: GraphHandle) -> Result<(), PluginError> {
        (**self).graph_destroy(graph)
    }
    fn computes(&self) -> bool {
        (**self).computes()
    }
}
