/* warpfs mask kernel: AES-128/256 in counter mode with the NIST GCM
 * counter layout (counter block = nonce(12) || u32 big-endian counter,
 * wrapping mod 2^32), one source for OpenCL C and CUDA C (NVRTC).
 *
 * One launch serves many contexts. The host passes:
 *   te    : 256 words, Te0[x] = (2*S[x], S[x], S[x], 3*S[x]) big-endian;
 *           copied to local/shared memory (Te1..Te3 are its rotations, the
 *           S-box is byte 1 of it)
 *   rk    : round keys, RK_WORDS words per key (big-endian words, FIPS-197
 *           expansion done on the host)
 *   desc  : DESC_WORDS words per context: nonce words 0..2 (big-endian),
 *           first counter, block count, output offset (blocks),
 *           key index << 8 | rounds, first work item
 *   ndesc : number of contexts; total: work items that have work
 *   out   : the masks, 16 bytes per block, at each context's offset
 * Work item g makes BPW consecutive counter blocks of the context whose
 * first work item is the largest one <= g (binary search over desc).
 * The work-group size must be 256 (one Te0 entry per work item). */

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define KERNEL extern "C" __global__
#define GLOBAL
#define LOCAL __shared__
#define GID (blockIdx.x * blockDim.x + threadIdx.x)
#define LID (threadIdx.x)
#define BARRIER __syncthreads()
typedef unsigned int uint;
#define ROTR(x, n) __funnelshift_r((x), (x), (n))
#define BSWAP(x) __byte_perm((x), 0, 0x0123)
#else
#define KERNEL __kernel
#define GLOBAL __global
#define LOCAL __local
#define GID ((uint)get_global_id(0))
#define LID ((uint)get_local_id(0))
#define BARRIER barrier(CLK_LOCAL_MEM_FENCE)
#define ROTR(x, n) rotate((uint)(x), (uint)(32 - (n)))
#define BSWAP(x) ((((x) & 0xffu) << 24) | (((x) & 0xff00u) << 8) | (((x) >> 8) & 0xff00u) | ((x) >> 24))
#endif

#define RK_WORDS 60
#define DESC_WORDS 8
#define BPW 4

#define T0(x) (te[(x) >> 24])
#define T1(x) ROTR(te[((x) >> 16) & 0xffu], 8)
#define T2(x) ROTR(te[((x) >> 8) & 0xffu], 16)
#define T3(x) ROTR(te[(x) & 0xffu], 24)
#define SB(x) ((te[(x)] >> 8) & 0xffu)

KERNEL void warpfs_aes_ctr(GLOBAL const uint *te_in, GLOBAL const uint *rks, GLOBAL const uint *desc,
                           uint ndesc, uint total, GLOBAL uint *out) {
    LOCAL uint te[256];
    te[LID] = te_in[LID];
    BARRIER;
    uint g = GID;
    if (g >= total || ndesc == 0) {
        return;
    }
    uint lo = 0, hi = ndesc - 1;
    while (lo < hi) {
        uint mid = (lo + hi + 1) >> 1;
        if (desc[mid * DESC_WORDS + 7] <= g) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    GLOBAL const uint *d = desc + lo * DESC_WORDS;
    uint n0 = d[0], n1 = d[1], n2 = d[2], ctr = d[3], nblk = d[4], off = d[5];
    uint rounds = d[6] & 0xffu;
    GLOBAL const uint *rk = rks + (d[6] >> 8) * RK_WORDS;
    uint first = (g - d[7]) * BPW;
    for (uint j = 0; j < BPW; j++) {
        uint b = first + j;
        if (b >= nblk) {
            break;
        }
        uint s0 = n0 ^ rk[0], s1 = n1 ^ rk[1], s2 = n2 ^ rk[2], s3 = (ctr + b) ^ rk[3];
        uint t0, t1, t2, t3;
        for (uint r = 1; r < rounds; r++) {
            GLOBAL const uint *k = rk + 4 * r;
            t0 = T0(s0) ^ T1(s1) ^ T2(s2) ^ T3(s3) ^ k[0];
            t1 = T0(s1) ^ T1(s2) ^ T2(s3) ^ T3(s0) ^ k[1];
            t2 = T0(s2) ^ T1(s3) ^ T2(s0) ^ T3(s1) ^ k[2];
            t3 = T0(s3) ^ T1(s0) ^ T2(s1) ^ T3(s2) ^ k[3];
            s0 = t0;
            s1 = t1;
            s2 = t2;
            s3 = t3;
        }
        GLOBAL const uint *k = rk + 4 * rounds;
        t0 = (SB(s0 >> 24) << 24) ^ (SB((s1 >> 16) & 0xffu) << 16) ^ (SB((s2 >> 8) & 0xffu) << 8) ^ SB(s3 & 0xffu) ^ k[0];
        t1 = (SB(s1 >> 24) << 24) ^ (SB((s2 >> 16) & 0xffu) << 16) ^ (SB((s3 >> 8) & 0xffu) << 8) ^ SB(s0 & 0xffu) ^ k[1];
        t2 = (SB(s2 >> 24) << 24) ^ (SB((s3 >> 16) & 0xffu) << 16) ^ (SB((s0 >> 8) & 0xffu) << 8) ^ SB(s1 & 0xffu) ^ k[2];
        t3 = (SB(s3 >> 24) << 24) ^ (SB((s0 >> 16) & 0xffu) << 16) ^ (SB((s1 >> 8) & 0xffu) << 8) ^ SB(s2 & 0xffu) ^ k[3];
        GLOBAL uint *o = out + (size_t)(off + b) * 4;
        /* Little-endian devices (every OpenCL GPU and CPU we target, all
         * NVIDIA GPUs): store the big-endian words as bytes in order. */
        o[0] = BSWAP(t0);
        o[1] = BSWAP(t1);
        o[2] = BSWAP(t2);
        o[3] = BSWAP(t3);
    }
}
