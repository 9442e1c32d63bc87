/* Guest instruction counter for qemu-user (TCG plugin API version 1, QEMU 7.2 as in Debian
 * bookworm's qemu-user), used by benchmarks/arm64_bench.sh.
 *
 *   gcc -shared -fPIC -O2 -o libvsense_insn.so benchmarks/arm64_bench_insn.c
 *   qemu-aarch64 -plugin ./libvsense_insn.so,out=/tmp/marks.txt PROGRAM ...
 *
 * Counts every guest instruction executed (all threads; one atomic add of the block's
 * instruction count each time a translated block starts) and writes "mark <id> <count>" to
 * the file named by the argument whenever the guest calls lseek(-1, MARK_BASE + id, 0)
 * (which fails with EBADF and has no other effect), and "exit <count>" at exit. The guest
 * brackets a measured phase with two marks; the difference is the phase's instruction
 * count. The declarations below are the subset of qemu-plugin.h (API version 1) used here:
 * Debian ships no header for it. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))
#define MARK_BASE UINT64_C(0x76530000000) /* "vS" << 32: far from any real file offset */

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*vcpu_udata_cb)(unsigned int, void *);
typedef void (*syscall_cb)(qemu_plugin_id_t, unsigned int, int64_t, uint64_t, uint64_t,
                           uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
typedef void (*udata_cb)(qemu_plugin_id_t, void *);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *, vcpu_udata_cb,
                                          int /* enum qemu_plugin_cb_flags */, void *);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t, syscall_cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, udata_cb, void *);

EXPORT int qemu_plugin_version = 1;

static uint64_t total;  /* guest instructions executed so far, all threads */
static FILE *out;

static void on_exec(unsigned int vcpu, void *n)
{
    (void)vcpu;
    __atomic_fetch_add(&total, (uint64_t)(uintptr_t)n, __ATOMIC_RELAXED);
}

static void on_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, 0 /* NO_REGS */,
                                         (void *)(uintptr_t)qemu_plugin_tb_n_insns(tb));
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1,
                       uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
                       uint64_t a7, uint64_t a8)
{
    (void)id; (void)vcpu; (void)num; (void)a3; (void)a4; (void)a5; (void)a6; (void)a7;
    (void)a8;
    if ((uint32_t)a1 == UINT32_MAX && a2 >= MARK_BASE && a2 < MARK_BASE + 0x10000) {
        fprintf(out, "mark %" PRIu64 " %" PRIu64 "\n", a2 - MARK_BASE,
                __atomic_load_n(&total, __ATOMIC_RELAXED));
        fflush(out);
    }
}

static void on_exit_(qemu_plugin_id_t id, void *p)
{
    (void)id; (void)p;
    fprintf(out, "exit %" PRIu64 "\n", __atomic_load_n(&total, __ATOMIC_RELAXED));
    fclose(out);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                               char **argv)
{
    (void)info;
    const char *path = "/dev/stderr";
    for (int i = 0; i < argc; i++)  /* out=PATH (the key "file" is QEMU's own) */
        if (argv[i][0] == 'o' && argv[i][1] == 'u' && argv[i][2] == 't' && argv[i][3] == '=')
            path = argv[i] + 4;
    out = fopen(path, "w");
    if (!out) {
        perror(path);
        return 1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_trans);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_atexit_cb(id, on_exit_, NULL);
    return 0;
}
