//! GPU XTS-AES (IEEE 1619) on OpenCL: the TrueCrypt GPU XTS paper's single
//! fused kernel (`kernels/aes_xts.cl`, Algorithm IV.2: every work item
//! recomputes its unit's tweak E_K2(n)·α^i), 256 work items per group, the
//! data sent in chunks of [`XTS_CHUNK`] bytes (256 KiB, the paper's chunk).
//! Whole data units of full 16-byte blocks only: ciphertext stealing stays
//! on the CPU. The kernel source is CUDA-ready (NVRTC macros) but only the
//! OpenCL host glue exists.

use super::opencl::{cl, is_pocl, Want, DISCOVERY};
use super::tables::{expand, te0, RK_WORDS, SBOX};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device as ClDevice, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, CL_MEM_READ_ONLY, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::{CL_BLOCKING, CL_NON_BLOCKING};
use std::sync::Mutex;
use zeroize::Zeroizing;

/// The kernel source (OpenCL C; CUDA C through its macros).
pub const XTS_KERNEL_SRC: &str = include_str!("../../kernels/aes_xts.cl");
const KERNEL_NAME: &str = "warpfs_aes_xts";
/// Work items per work group (one table entry each).
pub const XTS_GROUP: usize = 256;
/// Blocks per work item (`BPW` in the kernel).
const BPW: usize = 4;
/// Default bytes per launch: the paper's 256 KiB plaintext chunk.
pub const XTS_CHUNK: usize = 256 * 1024;
const TAB_WORDS: usize = 768;

const fn xtime(x: u8) -> u8 {
    (x << 1) ^ if x & 0x80 != 0 { 0x1b } else { 0 }
}

const fn gmul(mut a: u8, mut b: u8) -> u8 {
    let mut p = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            p ^= a;
        }
        a = xtime(a);
        b >>= 1;
    }
    p
}

fn inv_sbox() -> [u8; 256] {
    let mut inv = [0u8; 256];
    for (x, &s) in SBOX.iter().enumerate() {
        inv[s as usize] = x as u8;
    }
    inv
}

/// Td0[x] = (0e·Si[x], 09·Si[x], 0d·Si[x], 0b·Si[x]) as a big-endian word.
fn td0() -> [u32; 256] {
    let si = inv_sbox();
    let mut t = [0u32; 256];
    for (x, w) in t.iter_mut().enumerate() {
        let s = si[x];
        *w = u32::from_be_bytes([gmul(s, 0x0e), gmul(s, 0x09), gmul(s, 0x0d), gmul(s, 0x0b)]);
    }
    t
}

/// The 768 table words the kernel loads: Te0, Td0, inverse S-box.
fn tables() -> Vec<u32> {
    let mut v = Vec::with_capacity(TAB_WORDS);
    v.extend_from_slice(&te0());
    v.extend_from_slice(&td0());
    v.extend(inv_sbox().iter().map(|&b| u32::from(b)));
    v
}

/// InvMixColumns of one big-endian column word.
fn inv_mix(w: u32) -> u32 {
    let b = w.to_be_bytes();
    let m = |c: [u8; 4]| gmul(b[0], c[0]) ^ gmul(b[1], c[1]) ^ gmul(b[2], c[2]) ^ gmul(b[3], c[3]);
    u32::from_be_bytes([
        m([0x0e, 0x0b, 0x0d, 0x09]),
        m([0x09, 0x0e, 0x0b, 0x0d]),
        m([0x0d, 0x09, 0x0e, 0x0b]),
        m([0x0b, 0x0d, 0x09, 0x0e]),
    ])
}

/// The equivalent inverse cipher's schedule (FIPS-197 §5.3.5): round keys
/// in reverse order, InvMixColumns applied to the middle ones.
fn dec_schedule(enc: &[u32; RK_WORDS], rounds: usize) -> Zeroizing<[u32; RK_WORDS]> {
    let mut d = Zeroizing::new([0u32; RK_WORDS]);
    for r in 0..=rounds {
        for c in 0..4 {
            let w = enc[4 * (rounds - r) + c];
            d[4 * r + c] = if r == 0 || r == rounds { w } else { inv_mix(w) };
        }
    }
    d
}

/// An XTS key (Key1 ‖ Key2, IEEE 1619) expanded for the kernel.
pub struct XtsKeys {
    /// Data key encryption schedule then tweak key schedule (120 words).
    enc: Zeroizing<Vec<u32>>,
    /// Data key decryption schedule then tweak key schedule.
    dec: Zeroizing<Vec<u32>>,
    rounds: u32,
}

impl XtsKeys {
    /// Expand a 32-byte (XTS-AES-128) or 64-byte (XTS-AES-256) key: the
    /// first half encrypts the data, the second the tweak.
    pub fn new(key: &[u8]) -> Result<Self, String> {
        if key.len() != 32 && key.len() != 64 {
            return Err(format!("an XTS key is 32 or 64 bytes, not {}", key.len()));
        }
        let (k1, k2) = key.split_at(key.len() / 2);
        let (e1, rounds) = expand(k1).ok_or("bad data key length")?;
        let (e2, _) = expand(k2).ok_or("bad tweak key length")?;
        let d1 = dec_schedule(&e1, rounds as usize);
        let mut enc = Zeroizing::new(Vec::with_capacity(2 * RK_WORDS));
        enc.extend_from_slice(&e1[..]);
        enc.extend_from_slice(&e2[..]);
        let mut dec = Zeroizing::new(Vec::with_capacity(2 * RK_WORDS));
        dec.extend_from_slice(&d1[..]);
        dec.extend_from_slice(&e2[..]);
        Ok(Self { enc, dec, rounds })
    }
}

/// How a call splits into launches.
struct Plan {
    ublk: u32,
    per_unit: usize,
    launch_bytes: usize,
    b: [u32; 4],
}

fn plan(chunk: usize, unit_size: usize, len: usize, base_tweak: [u8; 16]) -> Result<Plan, String> {
    if unit_size == 0 || !unit_size.is_multiple_of(16) {
        return Err(format!(
            "the data unit size ({unit_size}) must be a non-zero multiple of 16"
        ));
    }
    if !len.is_multiple_of(unit_size) {
        return Err(format!("{len} bytes are not whole data units of {unit_size} bytes"));
    }
    let ublk = u32::try_from(unit_size / 16).map_err(|_| "data unit too large")?;
    let units_per_launch = (chunk / unit_size).max(1);
    let per_unit = (unit_size / 16).div_ceil(BPW);
    if units_per_launch
        .checked_mul(per_unit)
        .and_then(|n| u32::try_from(n).ok())
        .is_none()
    {
        return Err("too many work items for one launch".into());
    }
    let mut b = [0u32; 4];
    for (w, c) in b.iter_mut().zip(base_tweak.chunks_exact(4)) {
        *w = u32::from_le_bytes(c.try_into().expect("4 bytes"));
    }
    Ok(Plan {
        ublk,
        per_unit,
        launch_bytes: units_per_launch * unit_size,
        b,
    })
}

struct State {
    queue: CommandQueue,
    kernel: Kernel,
    keys: Buffer<u32>,
    data: Buffer<u8>,
    /// Bytes `data` holds.
    cap: usize,
}

// SAFETY: the OpenCL handles are thread-safe objects; the state is only
// used behind its mutex.
unsafe impl Send for State {}

/// An OpenCL device running the XTS kernel.
pub struct XtsDevice {
    name: String,
    pocl: bool,
    chunk: usize,
    tab: Buffer<u32>,
    state: Mutex<State>,
    _program: Program,
    context: Context,
}

/// Find a device; the caller holds `DISCOVERY` and the saved handlers.
fn pick(want: Want) -> Result<(String, bool, ClDevice), String> {
    let platforms = cl(
        "no OpenCL platform (libOpenCL / ICD)",
        opencl3::platform::get_platforms(),
    )?;
    for p in &platforms {
        let pname = p.name().unwrap_or_default();
        let Ok(ids) = p.get_devices(CL_DEVICE_TYPE_ALL) else {
            continue;
        };
        for id in ids {
            let d = ClDevice::new(id);
            let ty = d.dev_type().unwrap_or(0);
            let pocl = is_pocl(&pname);
            let real_gpu = ty & CL_DEVICE_TYPE_GPU != 0 && ty & CL_DEVICE_TYPE_CPU == 0 && !pocl;
            if want == Want::Any || real_gpu {
                let name = format!("{} on {}", d.name().unwrap_or_default().trim(), pname.trim());
                return Ok((name, pocl, d));
            }
        }
    }
    Err(format!(
        "{} OpenCL platform(s), no {} device",
        platforms.len(),
        if want == Want::Any { "usable" } else { "GPU" }
    ))
}

impl XtsDevice {
    /// Open an OpenCL device (`any`: pocl and CPU devices too; else only a
    /// real GPU), build the kernel, upload the tables; `chunk` bytes per
    /// launch (rounded down to whole data units, at least one unit).
    pub fn opencl(any: bool, chunk: usize) -> Result<Self, String> {
        std::panic::catch_unwind(|| Self::open(any, chunk))
            .unwrap_or_else(|_| Err("the OpenCL driver panicked while opening".into()))
    }

    fn open(any: bool, chunk: usize) -> Result<Self, String> {
        // Discovery, context and kernel build one at a time and with the
        // process's signal handlers restored afterwards (pocl/LLVM install
        // their own), as `opencl.rs` does for the mask kernel.
        let _one = DISCOVERY.lock().unwrap_or_else(|e| e.into_inner());
        let _keep = super::signals::SavedHandlers::save();
        let (name, pocl, dev) = pick(if any { Want::Any } else { Want::RealGpu })?;
        let context = cl("clCreateContext", Context::from_device(&dev))?;
        let program = Program::create_and_build_from_source(&context, XTS_KERNEL_SRC, "")
            .map_err(|log| format!("building the XTS kernel: {log}"))?;
        let kernel = cl("clCreateKernel", Kernel::create(&program, KERNEL_NAME))?;
        #[allow(deprecated)]
        let queue = cl("clCreateCommandQueue", CommandQueue::create_default(&context, 0))?;
        let chunk = chunk.max(16);
        // SAFETY: plain allocations without host pointers; the table upload
        // is blocking and reads a live vector.
        let (tab, keys, data) = unsafe {
            let mut tab = cl(
                "table buffer",
                Buffer::<u32>::create(&context, CL_MEM_READ_ONLY, TAB_WORDS, std::ptr::null_mut()),
            )?;
            cl(
                "table upload",
                queue.enqueue_write_buffer(&mut tab, CL_BLOCKING, 0, &tables(), &[]),
            )?;
            let keys = cl(
                "key buffer",
                Buffer::<u32>::create(&context, CL_MEM_READ_ONLY, 2 * RK_WORDS, std::ptr::null_mut()),
            )?;
            let data = cl(
                "data buffer",
                Buffer::<u8>::create(&context, CL_MEM_READ_WRITE, chunk, std::ptr::null_mut()),
            )?;
            (tab, keys, data)
        };
        Ok(Self {
            name,
            pocl,
            chunk,
            tab,
            state: Mutex::new(State {
                queue,
                kernel,
                keys,
                data,
                cap: chunk,
            }),
            _program: program,
            context,
        })
    }

    /// Device and platform name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the device is pocl (a CPU OpenCL, not a GPU).
    pub fn is_pocl(&self) -> bool {
        self.pocl
    }

    /// Bytes per launch (rounded down to whole data units, at least one).
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Change the bytes per launch (the device buffer grows on demand).
    pub fn set_chunk(&mut self, bytes: usize) {
        self.chunk = bytes.max(16);
    }

    /// Encrypt `data` (whole units of `unit_size` bytes, a multiple of 16)
    /// in place. Unit k of `data` is data unit `first_unit + k`; its tweak
    /// input is `base_tweak` XOR that number as a 128-bit little-endian
    /// integer (IEEE 1619: `base_tweak` all zero).
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
        let Plan {
            ublk,
            per_unit,
            launch_bytes,
            b,
        } = plan(self.chunk, unit_size, data.len(), base_tweak)?;
        if data.is_empty() {
            return Ok(());
        }
        let words = if dec { &keys.dec } else { &keys.enc };
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        if st.cap < launch_bytes {
            // SAFETY: a plain allocation without a host pointer.
            st.data = unsafe {
                cl(
                    "data buffer",
                    Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE, launch_bytes, std::ptr::null_mut()),
                )?
            };
            st.cap = launch_bytes;
        }
        let base = data.as_mut_ptr();
        let total = data.len();
        let rounds = keys.rounds;
        let dec_flag = u32::from(dec);
        // SAFETY: every command goes to one in-order queue and `finish` ends
        // them all before `data`/`words` (borrowed for this whole call) are
        // released. The write of a chunk reads its region of `data` before
        // the kernel and the read-back of the same region run (in order);
        // the regions of different chunks are disjoint.
        let res = (|| unsafe {
            cl(
                "key upload",
                st.queue
                    .enqueue_write_buffer(&mut st.keys, CL_NON_BLOCKING, 0, words, &[]),
            )?;
            let mut off = 0usize;
            while off < total {
                let len = launch_bytes.min(total - off);
                let units = (len / unit_size) as u32;
                let n = first_unit.wrapping_add((off / unit_size) as u128);
                let src = std::slice::from_raw_parts(base.add(off), len);
                cl(
                    "data upload",
                    st.queue
                        .enqueue_write_buffer(&mut st.data, CL_NON_BLOCKING, 0, src, &[]),
                )?;
                let items = units as usize * per_unit;
                cl(
                    "XTS kernel launch",
                    ExecuteKernel::new(&st.kernel)
                        .set_arg(&self.tab)
                        .set_arg(&st.keys)
                        .set_arg(&rounds)
                        .set_arg(&ublk)
                        .set_arg(&units)
                        .set_arg(&(n as u32))
                        .set_arg(&((n >> 32) as u32))
                        .set_arg(&((n >> 64) as u32))
                        .set_arg(&((n >> 96) as u32))
                        .set_arg(&b[0])
                        .set_arg(&b[1])
                        .set_arg(&b[2])
                        .set_arg(&b[3])
                        .set_arg(&dec_flag)
                        .set_arg(&st.data)
                        .set_global_work_size(items.div_ceil(XTS_GROUP) * XTS_GROUP)
                        .set_local_work_size(XTS_GROUP)
                        .enqueue_nd_range(&st.queue),
                )?;
                let dst = std::slice::from_raw_parts_mut(base.add(off), len);
                cl(
                    "data read-back",
                    st.queue.enqueue_read_buffer(&st.data, CL_NON_BLOCKING, 0, dst, &[]),
                )?;
                off += len;
            }
            Ok::<(), String>(())
        })();
        let fin = cl("clFinish", st.queue.finish());
        res.and(fin)
    }
}

impl Drop for XtsDevice {
    fn drop(&mut self) {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        // SAFETY: zero the key and data buffers; nothing else uses them.
        unsafe {
            let _ = st
                .queue
                .enqueue_fill_buffer(&mut st.keys, &[0u32], 0, 2 * RK_WORDS * 4, &[]);
            let _ = st.queue.enqueue_fill_buffer(&mut st.data, &[0u8], 0, st.cap, &[]);
        }
        let _ = st.queue.finish();
    }
}

/// XTS on CUDA device 0: NVRTC compiles the same kernel source, the host
/// side mirrors [`XtsDevice`]. NOT yet run on an NVIDIA GPU by this
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
        let func = cu("cuModuleGetFunction", module.load_function(KERNEL_NAME))?;
        let stream = cu("cuStreamCreate", ctx.new_stream())?;
        let chunk = chunk.max(16);
        let tab = cu("table upload", stream.clone_htod(&tables()[..]))?;
        let keys = cu("key buffer", stream.alloc_zeros::<u32>(2 * RK_WORDS))?;
        let data = cu("data buffer", stream.alloc_zeros::<u8>(chunk))?;
        cu("cuStreamSynchronize", stream.synchronize())?;
        Ok(Self {
            name,
            chunk,
            state: Mutex::new(CudaState {
                stream,
                func,
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
        use cudarc::driver::{LaunchConfig, PushKernelArg};
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        let s = st.stream.clone();
        if st.data.len() < p.launch_bytes {
            st.data = cu("data buffer", s.alloc_zeros::<u8>(p.launch_bytes))?;
        }
        let words: &[u32] = if dec { &keys.dec } else { &keys.enc };
        cu("key upload", s.memcpy_htod(words, &mut st.keys))?;
        let rounds = keys.rounds;
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
            let mut b = s.launch_builder(&st.func);
            b.arg(&st.tab)
                .arg(&st.keys)
                .arg(&rounds)
                .arg(&p.ublk)
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
            // SAFETY: the arguments match the kernel's signature (two
            // const uint*, twelve uint, uint*), and the kernel touches only
            // the `units` units of `data` this launch uploaded.
            cu("cuLaunchKernel", unsafe { b.launch(cfg) })?;
            cu(
                "data read-back",
                s.memcpy_dtoh(&st.data.slice(0..len), &mut data[off..off + len]),
            )?;
            off += len;
        }
        cu("cuStreamSynchronize", s.synchronize())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_tables() {
        let si = inv_sbox();
        assert_eq!(si[0x63], 0x00);
        assert_eq!(si[0x16], 0xff);
        // Td0[0] = (0e,09,0d,0b)·Si[0] with Si[0] = 0x52 (FIPS-197 fig. 14).
        assert_eq!(td0()[0], 0x51f4a750);
        assert_eq!(tables().len(), TAB_WORDS);
    }

    #[test]
    fn inv_mix_undoes_mix_columns() {
        // FIPS-197 §5.1.3 example column: db 13 53 45 -> 8e 4d a1 bc.
        assert_eq!(inv_mix(0x8e4da1bc), 0xdb135345);
    }

    #[test]
    fn key_lengths() {
        assert!(XtsKeys::new(&[0u8; 32]).is_ok());
        assert!(XtsKeys::new(&[0u8; 64]).is_ok());
        assert!(XtsKeys::new(&[0u8; 48]).is_err());
        let k = XtsKeys::new(&[7u8; 64]).unwrap();
        assert_eq!(k.rounds, 14);
        // The decryption schedule starts with the last encryption round key.
        assert_eq!(k.dec[0..4], k.enc[56..60]);
        assert_eq!(k.dec[60..], k.enc[60..]);
    }
}
