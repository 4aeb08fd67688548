/*
 * waes.h - C ABI of the warpfs keystream engine (libwaes), after WAESlib's
 * six calls: waes_init, waes_setkey, waes_ctx, waes_encrypt, waes_decrypt,
 * waes_finish (plus counter variants, waes_init_ex and waes_stats_json).
 *
 * AES-CTR with the NIST counter layout: counter block = 12-byte nonce ||
 * 32-bit big-endian block counter, incremented modulo 2^32 (GCM's inc32).
 * Keys are AES-128 (16 bytes) or AES-256 (32 bytes).
 *
 * Contexts and masks. A context is bound to a key and holds one mask: the
 * keystream of (key, nonce) from an initial counter. waes_ctx defines a
 * context for a nonce and returns at once; worker threads make its mask in
 * the background, highest priority first. waes_encrypt / waes_decrypt XOR
 * the mask into a buffer: when the context already holds that nonce the
 * mask is used (ready, or waited for while a worker makes it); otherwise the
 * context is redefined for the nonce and the mask is made on the calling
 * thread. A mask is never applied for a nonce other than the one passed.
 *
 * Offsets. Byte `offset` of a mask is byte (offset % 16) of the keystream
 * block whose counter is (initial counter + offset / 16) mod 2^32. The plain
 * calls use initial counter 1, the warpfs/GCM layout: mask bytes 0..15 are
 * E(J0) (the GCM tag mask) and file data starts at offset 16. The _ctr
 * variants take any initial counter; NIST SP 800-38A F.5.1 is
 * waes_encrypt_ctr(ctx, f0f1..fb, 0xfcfdfeff, buf, 64, 0). A request whose
 * offset + len reaches past 2^32 blocks (the keystream would repeat) is
 * refused with WAES_E_RANGE. Bytes past the context's mask length
 * (waes_init_ex's mask_len, default 16 + 4096) are computed directly.
 *
 * Errors. Every call returns a negative WAES_E_* code on bad input and never
 * touches the buffer then. Pointers must point to the stated number of bytes
 * (12 for a nonce, keylen for a key, len for a buffer) when not NULL; the
 * library cannot check that. All calls are thread-safe; calls on one
 * context are serialised.
 */
#ifndef WAES_H
#define WAES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WAES_OK 0
#define WAES_E_NULL (-1)     /* a required pointer was NULL */
#define WAES_E_LEN (-2)      /* bad length: key not 16/32 bytes, len > PTRDIFF_MAX */
#define WAES_E_NOINIT (-3)   /* waes_init not called, or waes_finish was */
#define WAES_E_STATE (-4)    /* waes_init called twice */
#define WAES_E_KEY (-5)      /* unknown key id */
#define WAES_E_CTX (-6)      /* unknown context id */
#define WAES_E_RANGE (-7)    /* offset + len past 2^32 counter blocks */
#define WAES_E_INTERNAL (-8) /* threads could not start, or an internal error */
#define WAES_E_LIMIT (-9)    /* too many keys or contexts */

/* Start the engine with `threads` worker threads (<= 0: one per core).
 * WARPFS_NO_AESNI=1 in the environment forces software AES. */
int waes_init(int threads);

/* waes_init with the mask length in bytes (0: 16 + 4096), speculation
 * (0: no workers, every mask is made by the caller when needed) and forced
 * software AES (nonzero: the papers' AES-NI-off runs). */
int waes_init_ex(int threads, size_t mask_len, int speculation, int software_aes);

/* Register an AES key of keylen 16 or 32 bytes. Returns its id (>= 0). */
int waes_setkey(const uint8_t *key, size_t keylen);

/* Define context `ctx` (a new one when ctx < 0) for key `key_id` and the
 * 12-byte `nonce` with initial counter 1, and start making its mask at
 * `priority` (higher is sooner). A NULL nonce only creates the context or
 * binds it to the key. Returns the context id (>= 0). */
int waes_ctx(int ctx, int key_id, const uint8_t *nonce, int priority);

/* waes_ctx with initial counter `counter` (mask offset 0). */
int waes_ctx_ctr(int ctx, int key_id, const uint8_t *nonce, uint32_t counter, int priority);

/* XOR mask bytes [offset, offset + len) of (ctx's key, nonce, counter 1)
 * into buf. Encryption and decryption are the same operation. */
int waes_encrypt(int ctx, const uint8_t *nonce, uint8_t *buf, size_t len, size_t offset);
int waes_decrypt(int ctx, const uint8_t *nonce, uint8_t *buf, size_t len, size_t offset);

/* The same from initial counter `counter`. */
int waes_encrypt_ctr(int ctx, const uint8_t *nonce, uint32_t counter, uint8_t *buf, size_t len, size_t offset);
int waes_decrypt_ctr(int ctx, const uint8_t *nonce, uint32_t counter, uint8_t *buf, size_t len, size_t offset);

/* Stop the engine: join the workers, forget keys and contexts. waes_init
 * may be called again afterwards. */
int waes_finish(void);

/* Write the engine's counters as NUL-terminated JSON into out (cap bytes).
 * Returns the JSON length without the NUL; a result >= cap means it did not
 * fit and nothing was written. out may be NULL when cap is 0. */
int waes_stats_json(char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* WAES_H */
