//! OpenCL host glue for the mask kernels (`opencl3`, libOpenCL loaded at run
//! time; AES and Twofish, built once): one context, two in-order queues
//! ("lanes"), each with its device
//! buffers and a pinned (CL_MEM_ALLOC_HOST_PTR, mapped once) host buffer,
//! all allocated when the device opens and reused for every launch.

use super::device::{
    launch_on, Device, Launch, DESC_WORDS, GROUP, KERNEL_NAME, KERNEL_SRC, KEY_BUF_WORDS, MAX_BLOCKS, MAX_CONTEXTS,
    TF_CTR_NAME, TF_CTR_SRC,
};
use super::tables::te0;
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device as ClDevice, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{
    Buffer, ClMem, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_ONLY, CL_MEM_READ_WRITE,
};
use opencl3::program::Program;
use opencl3::types::{cl_mem, CL_BLOCKING, CL_NON_BLOCKING};
use std::sync::Mutex;

/// Platform discovery is not thread-safe on pocl: one at a time.
pub(super) static DISCOVERY: Mutex<()> = Mutex::new(());

/// What kind of OpenCL device to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// The first device of any platform (pocl on a CPU included).
    Any,
    /// Only a real GPU (device type GPU, platform not pocl).
    RealGpu,
}

struct Lane {
    queue: CommandQueue,
    kernel: Kernel,
    /// The Twofish mask kernel (same arguments).
    tf_kernel: Kernel,
    /// Key table: AES round keys or Twofish tables, `KEY_BUF_WORDS`.
    rk: Buffer<u32>,
    desc: Buffer<u32>,
    out: Buffer<u32>,
    host: Buffer<u32>,
    /// `host` mapped for the lane's lifetime: `MAX_BLOCKS * 4` words.
    host_ptr: *mut u32,
}

// SAFETY: the raw pointer is the lane's own mapping of `host`; the lane is
// only used behind its mutex.
unsafe impl Send for Lane {}

/// An opened OpenCL device with its two lanes.
pub struct OpenClDevice {
    name: String,
    lanes: Vec<Mutex<Lane>>,
    te: Buffer<u32>,
    _program: Program,
    _tf_program: Program,
    context: Context,
}

pub(super) fn cl<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// Whether an OpenCL platform is pocl (a CPU implementation).
pub fn is_pocl(platform_name: &str) -> bool {
    let n = platform_name.to_ascii_lowercase();
    n.contains("portable computing language") || n.contains("pocl")
}

impl OpenClDevice {
    /// Find a device, build the kernel and allocate every buffer.
    pub fn open(want: Want) -> Result<Self, String> {
        let _one = DISCOVERY.lock().unwrap_or_else(|e| e.into_inner());
        let _keep = super::signals::SavedHandlers::save();
        let platforms = cl(
            "no OpenCL platform (libOpenCL / ICD)",
            opencl3::platform::get_platforms(),
        )?;
        let mut pick = None;
        for p in &platforms {
            let pname = p.name().unwrap_or_default();
            let Ok(ids) = p.get_devices(CL_DEVICE_TYPE_ALL) else {
                continue;
            };
            for id in ids {
                let d = ClDevice::new(id);
                let ty = d.dev_type().unwrap_or(0);
                let real_gpu = ty & CL_DEVICE_TYPE_GPU != 0 && ty & CL_DEVICE_TYPE_CPU == 0 && !is_pocl(&pname);
                if want == Want::Any || real_gpu {
                    pick = Some((pname.clone(), d));
                    break;
                }
            }
            if pick.is_some() {
                break;
            }
        }
        let Some((pname, dev)) = pick else {
            return Err(match want {
                Want::Any => format!("{} OpenCL platform(s), no device", platforms.len()),
                Want::RealGpu => format!(
                    "{} OpenCL platform(s), no GPU device (pocl and CPU devices do not count)",
                    platforms.len()
                ),
            });
        };
        let name = format!("{} on {}", dev.name().unwrap_or_default().trim(), pname.trim());
        let context = cl("clCreateContext", Context::from_device(&dev))?;
        let program = Program::create_and_build_from_source(&context, KERNEL_SRC, "")
            .map_err(|log| format!("building the mask kernel: {log}"))?;
        let tf_program = Program::create_and_build_from_source(&context, TF_CTR_SRC, "")
            .map_err(|log| format!("building the Twofish mask kernel: {log}"))?;
        let table = te0();
        // SAFETY: buffers are created with sizes in elements of u32 and no host pointer.
        let mut te = unsafe {
            cl(
                "te buffer",
                Buffer::<u32>::create(&context, CL_MEM_READ_ONLY, 256, std::ptr::null_mut()),
            )?
        };
        let mut lanes = Vec::new();
        for i in 0..2 {
            #[allow(deprecated)]
            let queue = cl("clCreateCommandQueue", CommandQueue::create_default(&context, 0))?;
            if i == 0 {
                // SAFETY: blocking write of a live array into a 256-word buffer.
                unsafe {
                    cl(
                        "te upload",
                        queue.enqueue_write_buffer(&mut te, CL_BLOCKING, 0, &table, &[]),
                    )?
                };
            }
            let kernel = cl("clCreateKernel", Kernel::create(&program, KERNEL_NAME))?;
            let tf_kernel = cl("clCreateKernel", Kernel::create(&tf_program, TF_CTR_NAME))?;
            // SAFETY: plain allocations; `host` is mapped once and unmapped in Drop.
            let lane = unsafe {
                let rk = cl(
                    "rk buffer",
                    Buffer::create(&context, CL_MEM_READ_ONLY, KEY_BUF_WORDS, std::ptr::null_mut()),
                )?;
                let desc = cl(
                    "desc buffer",
                    Buffer::create(
                        &context,
                        CL_MEM_READ_ONLY,
                        MAX_CONTEXTS * DESC_WORDS,
                        std::ptr::null_mut(),
                    ),
                )?;
                let out = cl(
                    "mask buffer",
                    Buffer::create(&context, CL_MEM_READ_WRITE, MAX_BLOCKS * 4, std::ptr::null_mut()),
                )?;
                let host = cl(
                    "pinned host buffer",
                    Buffer::create(
                        &context,
                        CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                        MAX_BLOCKS * 4,
                        std::ptr::null_mut(),
                    ),
                )?;
                let mut ptr: cl_mem = std::ptr::null_mut();
                cl(
                    "mapping the pinned buffer",
                    queue.enqueue_map_buffer(
                        &host,
                        CL_BLOCKING,
                        CL_MAP_READ | CL_MAP_WRITE,
                        0,
                        MAX_BLOCKS * 16,
                        &mut ptr,
                        &[],
                    ),
                )?;
                if ptr.is_null() {
                    return Err("mapping the pinned buffer gave a null pointer".into());
                }
                Lane {
                    queue,
                    kernel,
                    tf_kernel,
                    rk,
                    desc,
                    out,
                    host,
                    host_ptr: ptr.cast(),
                }
            };
            lanes.push(Mutex::new(lane));
        }
        Ok(Self {
            name,
            lanes,
            te,
            _program: program,
            _tf_program: tf_program,
            context,
        })
    }
}

impl Device for OpenClDevice {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn lanes(&self) -> usize {
        self.lanes.len()
    }

    fn launch(&self, lane: usize, l: &Launch<'_>, take: &mut dyn FnMut(&[u8])) -> Result<(), String> {
        launch_on(&self.lanes, lane, l, take, |ln, take| self.run(ln, l, take))
    }
}

impl OpenClDevice {
    /// One launch on a locked lane (checked by [`launch_on`]).
    fn run(&self, ln: &mut Lane, l: &Launch<'_>, take: &mut dyn FnMut(&[u8])) -> Result<(), String> {
        let global = (l.items as usize).div_ceil(GROUP) * GROUP;
        // SAFETY: the uploads read `l`, which outlives the blocking read that
        // ends this in-order queue's work; the read writes into the lane's
        // mapping, `blocks * 16` bytes of its `MAX_BLOCKS * 16`.
        unsafe {
            cl(
                "rk upload",
                ln.queue.enqueue_write_buffer(&mut ln.rk, CL_NON_BLOCKING, 0, l.rk, &[]),
            )?;
            cl(
                "desc upload",
                ln.queue
                    .enqueue_write_buffer(&mut ln.desc, CL_NON_BLOCKING, 0, l.desc, &[]),
            )?;
            cl(
                "kernel launch",
                ExecuteKernel::new(if l.twofish { &ln.tf_kernel } else { &ln.kernel })
                    .set_arg(&self.te)
                    .set_arg(&ln.rk)
                    .set_arg(&ln.desc)
                    .set_arg(&l.ndesc)
                    .set_arg(&l.items)
                    .set_arg(&ln.out)
                    .set_global_work_size(global)
                    .set_local_work_size(GROUP)
                    .enqueue_nd_range(&ln.queue),
            )?;
            let words = std::slice::from_raw_parts_mut(ln.host_ptr, l.blocks * 4);
            cl(
                "mask read-back",
                ln.queue.enqueue_read_buffer(&ln.out, CL_BLOCKING, 0, words, &[]),
            )?;
            let bytes = std::slice::from_raw_parts(ln.host_ptr.cast::<u8>(), l.blocks * 16);
            take(bytes);
        }
        Ok(())
    }
}

impl Drop for OpenClDevice {
    fn drop(&mut self) {
        for ln in &self.lanes {
            let mut guard = ln.lock().unwrap_or_else(|e| e.into_inner());
            let ln = &mut *guard;
            // SAFETY: zero the lane's key and mask buffers and its mapping,
            // then unmap it; nothing else uses the lane any more.
            unsafe {
                let _ = ln
                    .queue
                    .enqueue_fill_buffer(&mut ln.rk, &[0u32], 0, KEY_BUF_WORDS * 4, &[]);
                let _ = ln
                    .queue
                    .enqueue_fill_buffer(&mut ln.out, &[0u32], 0, MAX_BLOCKS * 16, &[]);
                let _ = ln.queue.finish();
                std::ptr::write_bytes(ln.host_ptr, 0, MAX_BLOCKS * 4);
                let _ = ln
                    .queue
                    .enqueue_unmap_mem_object(ln.host.get(), ln.host_ptr.cast(), &[]);
                let _ = ln.queue.finish();
            }
        }
        let _ = &self.context;
    }
}
