/* waes_test.c - checks libwaes from C: the NIST SP 800-38A F.5.1 CTR-AES128
 * and F.5.5 CTR-AES256 known answers, encrypt/decrypt round trips on the
 * speculative and inline paths, bad input, and four threads at once.
 * Run by crates/engine-capi/run-c-test.sh. */
#include "waes.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                    \
        }                                                                  \
    } while (0)

static void unhex(const char *s, uint8_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) {
            fprintf(stderr, "bad hex\n");
            exit(2);
        }
        out[i] = (uint8_t)v;
    }
}

static const char *PT =
    "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
    "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710";
static const char *CT128 =
    "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff"
    "5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee";
static const char *CT256 =
    "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5"
    "2b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6";

static void known_answer(const char *keyhex, size_t keylen, const char *cthex) {
    uint8_t key[32], nonce[12], pt[64], ct[64], buf[64];
    unhex(keyhex, key, keylen);
    unhex("f0f1f2f3f4f5f6f7f8f9fafb", nonce, 12);
    unhex(PT, pt, 64);
    unhex(cthex, ct, 64);
    int k = waes_setkey(key, keylen);
    CHECK(k >= 0);
    int c = waes_ctx(-1, k, NULL, 0);
    CHECK(c >= 0);

    /* Inline path: the context holds no mask for this nonce yet. */
    memcpy(buf, pt, 64);
    CHECK(waes_encrypt_ctr(c, nonce, 0xfcfdfeffu, buf, 64, 0) == WAES_OK);
    CHECK(memcmp(buf, ct, 64) == 0);

    /* Speculative path: define first, then decrypt block by block by offset. */
    CHECK(waes_ctx_ctr(c, k, nonce, 0xfcfdfeffu, 10) == c);
    for (size_t off = 0; off < 64; off += 16)
        CHECK(waes_decrypt_ctr(c, nonce, 0xfcfdfeffu, buf + off, 16, off) == WAES_OK);
    CHECK(memcmp(buf, pt, 64) == 0);

    /* Counter 1 layout: offset 16*i is counter 1+i, so the NIST counter
     * fcfdfeff sits at offset 16 * 0xfcfdfefe. */
    memcpy(buf, pt, 64);
    CHECK(waes_encrypt(c, nonce, buf, 64, (size_t)16 * 0xfcfdfefeu) == WAES_OK);
    CHECK(memcmp(buf, ct, 64) == 0);
}

struct job {
    int ctx;
    int key;
    int seed;
    int ok;
};

static void *worker(void *arg) {
    struct job *j = arg;
    uint8_t nonce[12] = {0}, data[4096], orig[4096];
    j->ok = 1;
    for (int i = 0; i < 200; i++) {
        nonce[0] = (uint8_t)j->seed;
        nonce[8] = (uint8_t)(i >> 8);
        nonce[9] = (uint8_t)i;
        for (size_t b = 0; b < sizeof data; b++) orig[b] = data[b] = (uint8_t)(b * 31 + i + j->seed);
        if (i % 2) /* half the time the mask is started ahead */
            if (waes_ctx(j->ctx, j->key, nonce, i) != j->ctx) j->ok = 0;
        if (waes_encrypt(j->ctx, nonce, data, sizeof data, 16) != WAES_OK) j->ok = 0;
        if (memcmp(data, orig, sizeof data) == 0) j->ok = 0;
        if (waes_decrypt(j->ctx, nonce, data, sizeof data, 16) != WAES_OK) j->ok = 0;
        if (memcmp(data, orig, sizeof data) != 0) j->ok = 0;
    }
    return NULL;
}

int main(void) {
    uint8_t key[16] = {0}, nonce[12] = {0}, buf[32] = {0};

    CHECK(waes_setkey(key, 16) == WAES_E_NOINIT);
    CHECK(waes_finish() == WAES_E_NOINIT);
    CHECK(waes_init(0) == WAES_OK);
    CHECK(waes_init(0) == WAES_E_STATE);

    known_answer("2b7e151628aed2a6abf7158809cf4f3c", 16, CT128);
    known_answer("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", 32, CT256);

    /* Bad input gets error codes. */
    int k = waes_setkey(key, 16);
    int c = waes_ctx(-1, k, NULL, 0);
    CHECK(waes_setkey(NULL, 16) == WAES_E_NULL);
    CHECK(waes_setkey(key, 24) == WAES_E_LEN);
    CHECK(waes_ctx(-1, 1000, nonce, 0) == WAES_E_KEY);
    CHECK(waes_ctx(1000, k, nonce, 0) == WAES_E_CTX);
    CHECK(waes_encrypt(c, NULL, buf, 32, 0) == WAES_E_NULL);
    CHECK(waes_encrypt(c, nonce, NULL, 32, 0) == WAES_E_NULL);
    CHECK(waes_encrypt(c, nonce, NULL, 0, 0) == WAES_OK);
    CHECK(waes_encrypt(-1, nonce, buf, 32, 0) == WAES_E_CTX);
    CHECK(waes_encrypt(c, nonce, buf, (size_t)-1, 0) == WAES_E_LEN);
    CHECK(waes_encrypt(c, nonce, buf, 32, (size_t)16 << 32) == WAES_E_RANGE);
    for (size_t i = 0; i < sizeof buf; i++) CHECK(buf[i] == 0);

    /* Four threads, each on its own context. */
    pthread_t th[4];
    struct job jobs[4];
    for (int t = 0; t < 4; t++) {
        jobs[t].key = k;
        jobs[t].ctx = waes_ctx(-1, k, NULL, 0);
        jobs[t].seed = t + 1;
        pthread_create(&th[t], NULL, worker, &jobs[t]);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CHECK(jobs[t].ok);
    }

    char stats[2048];
    int n = waes_stats_json(stats, sizeof stats);
    CHECK(n > 0 && (size_t)n < sizeof stats);
    if (n > 0 && (size_t)n < sizeof stats) printf("stats: %s\n", stats);

    CHECK(waes_finish() == WAES_OK);
    CHECK(waes_encrypt(c, nonce, buf, 32, 0) == WAES_E_NOINIT);

    /* Software AES, no speculation: same answers. */
    CHECK(waes_init_ex(1, 0, 0, 1) == WAES_OK);
    known_answer("2b7e151628aed2a6abf7158809cf4f3c", 16, CT128);
    CHECK(waes_finish() == WAES_OK);

    if (failures) {
        fprintf(stderr, "waes_test: %d check(s) failed\n", failures);
        return 1;
    }
    printf("waes_test: all checks passed\n");
    return 0;
}
