//! CUDA host glue for the mask kernels (`cudarc`, libcuda and libnvrtc loaded
//! at run time; NVRTC compiles the same AES and Twofish kernel sources
//! OpenCL builds): one
//! context, two streams ("lanes"), each with its device buffers and a pinned
//! host buffer, all allocated when the device opens and reused.
//!
//! Not yet run on an NVIDIA GPU by this project: it builds everywhere and
//! its kernel logic is the one CI checks on OpenCL (pocl).

use super::device::{
    launch_on, Device, Launch, DESC_WORDS, GROUP, KERNEL_NAME, KERNEL_SRC, KEY_BUF_WORDS, MAX_BLOCKS, MAX_CONTEXTS,
    TF_CTR_NAME, TF_CTR_SRC,
};
use super::tables::te0;
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice, PushKernelArg};
use std::sync::{Arc, Mutex};

struct Lane {
    stream: Arc<CudaStream>,
    func: CudaFunction,
    /// The Twofish mask kernel (same arguments).
    tf_func: CudaFunction,
    /// Key table: AES round keys or Twofish tables, `KEY_BUF_WORDS`.
    rk: CudaSlice<u32>,
    desc: CudaSlice<u32>,
    out: CudaSlice<u32>,
    host: PinnedHostSlice<u32>,
}

/// An opened CUDA device with its two lanes.
pub struct CudaDevice {
    name: String,
    te: CudaSlice<u32>,
    lanes: Vec<Mutex<Lane>>,
    _ctx: Arc<CudaContext>,
}

fn cu<T, E: std::fmt::Debug>(what: &str, r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e:?}"))
}

/// Whether libcuda and libnvrtc can be loaded (cudarc panics on first use
/// when they cannot).
pub fn libraries_present() -> bool {
    std::panic::catch_unwind(|| {
        // SAFETY: both only try to dlopen the library.
        unsafe { cudarc::driver::sys::is_culib_present() && cudarc::nvrtc::sys::is_culib_present() }
    })
    .unwrap_or(false)
}

impl CudaDevice {
    /// Open device 0, compile the kernel and allocate every buffer.
    pub fn open() -> Result<Self, String> {
        if !libraries_present() {
            return Err("libcuda or libnvrtc not found".into());
        }
        std::panic::catch_unwind(Self::open_inner)
            .unwrap_or_else(|_| Err("the CUDA driver panicked while opening".into()))
    }

    fn open_inner() -> Result<Self, String> {
        let n = cu("cuDeviceGetCount", CudaContext::device_count())?;
        if n < 1 {
            return Err("no CUDA device".into());
        }
        let ctx = cu("cuCtxCreate", CudaContext::new(0))?;
        let name = format!("{} (CUDA)", cu("cuDeviceGetName", ctx.name())?);
        let ptx = cu(
            "NVRTC compile of the mask kernel",
            cudarc::nvrtc::compile_ptx(KERNEL_SRC),
        )?;
        let module = cu("cuModuleLoadData", ctx.load_module(ptx))?;
        let tf_ptx = cu(
            "NVRTC compile of the Twofish mask kernel",
            cudarc::nvrtc::compile_ptx(TF_CTR_SRC),
        )?;
        let tf_module = cu("cuModuleLoadData", ctx.load_module(tf_ptx))?;
        let s0 = cu("cuStreamCreate", ctx.new_stream())?;
        let te = cu("te upload", s0.clone_htod(&te0()[..]))?;
        let mut lanes = Vec::new();
        for i in 0..2 {
            let stream = if i == 0 {
                s0.clone()
            } else {
                cu("cuStreamCreate", ctx.new_stream())?
            };
            let func = cu("cuModuleGetFunction", module.load_function(KERNEL_NAME))?;
            let tf_func = cu("cuModuleGetFunction", tf_module.load_function(TF_CTR_NAME))?;
            let rk = cu("rk buffer", stream.alloc_zeros::<u32>(KEY_BUF_WORDS))?;
            let desc = cu("desc buffer", stream.alloc_zeros::<u32>(MAX_CONTEXTS * DESC_WORDS))?;
            let out = cu("mask buffer", stream.alloc_zeros::<u32>(MAX_BLOCKS * 4))?;
            // SAFETY: the pinned buffer is only read after the device wrote it.
            // Flags 0: cached (not write-combined) memory, the host reads it.
            let host = cu("pinned host buffer", unsafe {
                ctx.alloc_pinned_with_flags::<u32>(MAX_BLOCKS * 4, 0)
            })?;
            lanes.push(Mutex::new(Lane {
                stream,
                func,
                tf_func,
                rk,
                desc,
                out,
                host,
            }));
        }
        cu("cuStreamSynchronize", s0.synchronize())?;
        Ok(Self {
            name,
            te,
            lanes,
            _ctx: ctx,
        })
    }

    /// One launch on a locked lane (checked by [`launch_on`]).
    fn run(&self, ln: &mut Lane, l: &Launch<'_>, take: &mut dyn FnMut(&[u8])) -> Result<(), String> {
        let st = ln.stream.clone();
        cu("rk upload", st.memcpy_htod(l.rk, &mut ln.rk.slice_mut(0..l.rk.len())))?;
        cu(
            "desc upload",
            st.memcpy_htod(l.desc, &mut ln.desc.slice_mut(0..l.desc.len())),
        )?;
        let cfg = LaunchConfig {
            grid_dim: ((l.items as usize).div_ceil(GROUP) as u32, 1, 1),
            block_dim: (GROUP as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = st.launch_builder(if l.twofish { &ln.tf_func } else { &ln.func });
        b.arg(&self.te)
            .arg(&ln.rk)
            .arg(&ln.desc)
            .arg(&l.ndesc)
            .arg(&l.items)
            .arg(&mut ln.out);
        // SAFETY: the argument list matches both kernels' signature
        // (const uint*, const uint*, const uint*, uint, uint, uint*), and the
        // kernel writes only the `blocks` blocks the descriptors name.
        cu("cuLaunchKernel", unsafe { b.launch(cfg) })?;
        let words = l.blocks * 4;
        cu("mask read-back", st.memcpy_dtoh(&ln.out.slice(0..words), &mut ln.host))?;
        cu("cuStreamSynchronize", st.synchronize())?;
        let host = cu("pinned buffer", ln.host.as_slice())?;
        // SAFETY: u32 → u8 view of initialised memory.
        let bytes = unsafe { std::slice::from_raw_parts(host.as_ptr().cast::<u8>(), words * 4) };
        take(bytes);
        Ok(())
    }
}

impl Device for CudaDevice {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn lanes(&self) -> usize {
        self.lanes.len()
    }

    fn launch(&self, lane: usize, l: &Launch<'_>, take: &mut dyn FnMut(&[u8])) -> Result<(), String> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            launch_on(&self.lanes, lane, l, take, |ln, take| self.run(ln, l, take))
        }))
        .unwrap_or_else(|_| Err("the CUDA driver panicked during a launch".into()))
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for ln in &self.lanes {
                let mut guard = ln.lock().unwrap_or_else(|e| e.into_inner());
                let ln = &mut *guard;
                let st = ln.stream.clone();
                let _ = st.memset_zeros(&mut ln.rk);
                let _ = st.memset_zeros(&mut ln.out);
                let _ = st.synchronize();
                if let Ok(h) = ln.host.as_mut_slice() {
                    h.fill(0);
                }
            }
        }));
    }
}
