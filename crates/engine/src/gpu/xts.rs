//! GPU XTS-AES and XTS-Twofish (IEEE 1619) on OpenCL: the TrueCrypt GPU
//! XTS paper's single fused kernel (`kernels/aes_xts.cl`,
//! `kernels/twofish_xts.cl`, Algorithm IV.2: every work item recomputes its
//! unit's tweak E_K2(n)·α^i), 256 work items per group, the data sent in
//! chunks of [`XTS_CHUNK`] bytes (256 KiB, the paper's chunk). Whole data
//! units of full 16-byte blocks only: ciphertext stealing stays on the
//! CPU. The same sources build for CUDA (`xts_cuda.rs`).

use super::opencl::{cl, is_pocl, Want, DISCOVERY};
use super::xts_keys::{tables, XtsKeys, KEY_WORDS, TAB_WORDS};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device as ClDevice, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, CL_MEM_READ_ONLY, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::{CL_BLOCKING, CL_NON_BLOCKING};
use std::sync::Mutex;
use warpfs_crypto::XtsCipher;

/// The kernel source (OpenCL C; CUDA C through its macros).
pub const XTS_KERNEL_SRC: &str = include_str!("../../kernels/aes_xts.cl");
pub(super) const KERNEL_NAME: &str = "warpfs_aes_xts";
/// The XTS-Twofish kernel source (same conventions).
pub const TF_KERNEL_SRC: &str = concat!(
    include_str!("../../kernels/twofish_round.cl"),
    include_str!("../../kernels/twofish_xts.cl")
);
pub(super) const TF_KERNEL_NAME: &str = "warpfs_twofish_xts";
/// Work items per work group (one table entry each).
pub const XTS_GROUP: usize = 256;
/// Blocks per work item (`BPW` in the kernel).
const BPW: usize = 4;
/// Default bytes per launch: the paper's 256 KiB plaintext chunk.
pub const XTS_CHUNK: usize = 256 * 1024;

/// How a call splits into launches.
pub(super) struct Plan {
    pub(super) ublk: u32,
    pub(super) per_unit: usize,
    pub(super) launch_bytes: usize,
    pub(super) b: [u32; 4],
}

pub(super) fn plan(chunk: usize, unit_size: usize, len: usize, base_tweak: [u8; 16]) -> Result<Plan, String> {
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
    tf_kernel: Kernel,
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
    _tf_program: Program,
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
        let tf_program = Program::create_and_build_from_source(&context, TF_KERNEL_SRC, "")
            .map_err(|log| format!("building the XTS-Twofish kernel: {log}"))?;
        let tf_kernel = cl("clCreateKernel", Kernel::create(&tf_program, TF_KERNEL_NAME))?;
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
                Buffer::<u32>::create(&context, CL_MEM_READ_ONLY, KEY_WORDS, std::ptr::null_mut()),
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
                tf_kernel,
                keys,
                data,
                cap: chunk,
            }),
            _program: program,
            _tf_program: tf_program,
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
        let words = keys.words(dec);
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
        let rounds = keys.rounds();
        let twofish = keys.cipher() == XtsCipher::Twofish;
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
                // AES: tables, keys, rounds, ...; Twofish: keys, ... (its
                // tables are in the key words).
                let mut exec = if twofish {
                    let mut e = ExecuteKernel::new(&st.tf_kernel);
                    e.set_arg(&st.keys);
                    e
                } else {
                    let mut e = ExecuteKernel::new(&st.kernel);
                    e.set_arg(&self.tab).set_arg(&st.keys).set_arg(&rounds);
                    e
                };
                cl(
                    "XTS kernel launch",
                    exec.set_arg(&ublk)
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
        let wipe = if dec {
            // Plaintext leaves the device buffer with the request, even a
            // failed one (in order: after the last read-back).
            // SAFETY: a fill of the whole buffer this state owns.
            cl("data buffer wipe", unsafe {
                st.queue.enqueue_fill_buffer(&mut st.data, &[0u8], 0, st.cap, &[])
            })
            .map(|_| ())
        } else {
            Ok(())
        };
        let fin = cl("clFinish", st.queue.finish());
        res.and(wipe).and(fin)
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
                .enqueue_fill_buffer(&mut st.keys, &[0u32], 0, KEY_WORDS * 4, &[]);
            let _ = st.queue.enqueue_fill_buffer(&mut st.data, &[0u8], 0, st.cap, &[]);
        }
        let _ = st.queue.finish();
    }
}
