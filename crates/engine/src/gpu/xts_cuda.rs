//! XTS (AES and Twofish) on CUDA device 0 from the same kernel sources as
//! the OpenCL device (`xts.rs`), compiled by NVRTC.

use super::xts::{plan, Plan, TF_KERNEL_NAME, TF_KERNEL_SRC, XTS_GROUP, XTS_KERNEL_SRC};
use super::xts_keys::{tables, XtsKeys, KEY_WORDS};
use std::sync::Mutex;
use warpfs_crypto::XtsCipher;

/// XTS on CUDA device 0: NVRTC compiles the same kernel sources, the host
/// side mirrors [`XtsDevice`](super::XtsDevice). NOT yet run on an NVIDIA GPU by this
/// project (no GPU here): it builds everywhere, its kernel logic is the one
/// the OpenCL tests check, and `tests/gpu_xts.rs` checks it against
/// `xts-mode` wherever libcuda, libnvrtc and a device exist.
pub struct XtsCudaDevice {
    name: String,
    chunk: usize,
    state: Mutex<CudaState>,
    _ctx: std::sync::Arc<cudarc::driver::CudaContext>,
}

struct CudaState {
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
    func: cudarc::driver::CudaFunction,
    tf_func: cudarc::driver::CudaFunction,
    tab: cudarc::driver::CudaSlice<u32>,
    keys: cudarc::driver::CudaSlice<u32>,
    data: cudarc::driver::CudaSlice<u8>,
}

fn cu<T, E: std::fmt::Debug>(what: &str, r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e:?}"))
}

impl XtsCudaDevice {
    /// Open CUDA device 0 and compile the kernel; `chunk` bytes per launch.
    pub fn open(chunk: usize) -> Result<Self, String> {
        if !super::cuda::libraries_present() {
            return Err("libcuda or libnvrtc not found".into());
        }
        std::panic::catch_unwind(|| Self::open_inner(chunk))
            .unwrap_or_else(|_| Err("the CUDA driver panicked while opening".into()))
    }

    fn open_inner(chunk: usize) -> Result<Self, String> {
        use cudarc::driver::CudaContext;
        let n = cu("cuDeviceGetCount", CudaContext::device_count())?;
        if n < 1 {
            return Err("no CUDA device".into());
        }
        let ctx = cu("cuCtxCreate", CudaContext::new(0))?;
        let name = format!("{} (CUDA)", cu("cuDeviceGetName", ctx.name())?);
        let ptx = cu(
            "NVRTC compile of the XTS kernel",
            cudarc::nvrtc::compile_ptx(XTS_KERNEL_SRC),
        )?;
        let module = cu("cuModuleLoadData", ctx.load_module(ptx))?;
        let func = cu("cuModuleGetFunction", module.load_function(super::xts::KERNEL_NAME))?;
        let tf_ptx = cu(
            "NVRTC compile of the XTS-Twofish kernel",
            cudarc::nvrtc::compile_ptx(TF_KERNEL_SRC),
        )?;
        let tf_module = cu("cuModuleLoadData", ctx.load_module(tf_ptx))?;
        let tf_func = cu("cuModuleGetFunction", tf_module.load_function(TF_KERNEL_NAME))?;
        let stream = cu("cuStreamCreate", ctx.new_stream())?;
        let chunk = chunk.max(16);
        let tab = cu("table upload", stream.clone_htod(&tables()[..]))?;
        let keys = cu("key buffer", stream.alloc_zeros::<u32>(KEY_WORDS))?;
        let data = cu("data buffer", stream.alloc_zeros::<u8>(chunk))?;
        cu("cuStreamSynchronize", stream.synchronize())?;
        Ok(Self {
            name,
            chunk,
            state: Mutex::new(CudaState {
                stream,
                func,
                tf_func,
                tab,
                keys,
                data,
            }),
            _ctx: ctx,
        })
    }

    /// Device name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Encrypt in place; the arguments as for [`XtsDevice::encrypt`].
    pub fn encrypt(
        &self,
        keys: &XtsKeys,
        unit_size: usize,
        first_unit: u128,
        base_tweak: [u8; 16],
        data: &mut [u8],
    ) -> Result<(), String> {
        self.run(keys, false, unit_size, first_unit, base_tweak, data)
    }

    /// Decrypt in place; the arguments as for [`XtsDevice::encrypt`].
    pub fn decrypt(
        &self,
        keys: &XtsKeys,
        unit_size: usize,
        first_unit: u128,
        base_tweak: [u8; 16],
        data: &mut [u8],
    ) -> Result<(), String> {
        self.run(keys, true, unit_size, first_unit, base_tweak, data)
    }

    fn run(
        &self,
        keys: &XtsKeys,
        dec: bool,
        unit_size: usize,
        first_unit: u128,
        base_tweak: [u8; 16],
        data: &mut [u8],
    ) -> Result<(), String> {
        let p = plan(self.chunk, unit_size, data.len(), base_tweak)?;
        if data.is_empty() {
            return Ok(());
        }
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.run_inner(keys, dec, unit_size, first_unit, &p, data)
        }))
        .unwrap_or_else(|_| Err("the CUDA driver panicked during XTS".into()))
    }

    fn run_inner(
        &self,
        keys: &XtsKeys,
        dec: bool,
        unit_size: usize,
        first_unit: u128,
        p: &Plan,
        data: &mut [u8],
    ) -> Result<(), String> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        let s = st.stream.clone();
        if st.data.len() < p.launch_bytes {
            st.data = cu("data buffer", s.alloc_zeros::<u8>(p.launch_bytes))?;
        }
        let words: &[u32] = keys.words(dec);
        cu("key upload", s.memcpy_htod(words, &mut st.keys))?;
        let r = Self::launches(st, &s, keys, dec, unit_size, first_unit, p, data);
        if dec {
            // Plaintext leaves the device buffer with the request, even a
            // failed one (stream order: after the last read-back).
            let _ = s.memset_zeros(&mut st.data);
        }
        r.and(cu("cuStreamSynchronize", s.synchronize()))
    }

    #[allow(clippy::too_many_arguments)]
    fn launches(
        st: &mut CudaState,
        s: &std::sync::Arc<cudarc::driver::CudaStream>,
        keys: &XtsKeys,
        dec: bool,
        unit_size: usize,
        first_unit: u128,
        p: &Plan,
        data: &mut [u8],
    ) -> Result<(), String> {
        use cudarc::driver::{LaunchConfig, PushKernelArg};
        let rounds = keys.rounds();
        let twofish = keys.cipher() == XtsCipher::Twofish;
        let dec_flag = u32::from(dec);
        let mut off = 0usize;
        while off < data.len() {
            let len = p.launch_bytes.min(data.len() - off);
            let units = (len / unit_size) as u32;
            let n = first_unit.wrapping_add((off / unit_size) as u128);
            let f = [n as u32, (n >> 32) as u32, (n >> 64) as u32, (n >> 96) as u32];
            cu(
                "data upload",
                s.memcpy_htod(&data[off..off + len], &mut st.data.slice_mut(0..len)),
            )?;
            let items = units as usize * p.per_unit;
            let cfg = LaunchConfig {
                grid_dim: (items.div_ceil(XTS_GROUP) as u32, 1, 1),
                block_dim: (XTS_GROUP as u32, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = s.launch_builder(if twofish { &st.tf_func } else { &st.func });
            if !twofish {
                b.arg(&st.tab);
            }
            b.arg(&st.keys);
            if !twofish {
                b.arg(&rounds);
            }
            b.arg(&p.ublk)
                .arg(&units)
                .arg(&f[0])
                .arg(&f[1])
                .arg(&f[2])
                .arg(&f[3])
                .arg(&p.b[0])
                .arg(&p.b[1])
                .arg(&p.b[2])
                .arg(&p.b[3])
                .arg(&dec_flag)
                .arg(&mut st.data);
            // SAFETY: the arguments match the kernel's signature (AES: two
            // const uint*, twelve uint, uint*; Twofish: one const uint*,
            // eleven uint, uint*), and the kernel touches only the `units`
            // units of `data` this launch uploaded.
            cu("cuLaunchKernel", unsafe { b.launch(cfg) })?;
            cu(
                "data read-back",
                s.memcpy_dtoh(&st.data.slice(0..len), &mut data[off..off + len]),
            )?;
            off += len;
        }
        Ok(())
    }
}

impl Drop for XtsCudaDevice {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let st = &mut *guard;
            let s = st.stream.clone();
            let _ = s.memset_zeros(&mut st.keys);
            let _ = s.memset_zeros(&mut st.data);
            let _ = s.synchronize();
        }));
    }
}
