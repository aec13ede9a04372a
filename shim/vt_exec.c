/*
 * The clock shim's watch on what a dilated process starts (see vt.c). A program
 * that never calls libc's time functions cannot be dilated by a preload: a static
 * binary (no dynamic loader, so no LD_PRELOAD) and a Go program (its runtime reads
 * the vDSO and makes its own syscalls). Before a process of a dilated node runs
 * such a program (execve, execv, execvp, execvpe, posix_spawn, posix_spawnp), the
 * shim appends a line to the file named by FIDELNET_VT_LOG:
 *
 *     unreached <pid> <static|go> <path>
 *
 * fidelnet reads it (fidelnet/vt/reach.py): a warning naming the program, and the
 * result's provenance. The program still runs, undilated; it is never hidden.
 */
#include "vt_internal.h"

#include <elf.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>

static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execvpe)(const char *, char *const[], char *const[]);
static int (*real_posix_spawn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                               const posix_spawnattr_t *, char *const[], char *const[]);
static int (*real_posix_spawnp)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                                const posix_spawnattr_t *, char *const[], char *const[]);

static void resolve(void)
{
    if (!inited)
        vt_init();
    if (__atomic_load_n(&real_posix_spawnp, __ATOMIC_ACQUIRE))
        return;
    real_execve = (__typeof__(real_execve))dlsym(RTLD_NEXT, "execve");
    real_execvpe = (__typeof__(real_execvpe))dlsym(RTLD_NEXT, "execvpe");
    real_posix_spawn = (__typeof__(real_posix_spawn))dlsym(RTLD_NEXT, "posix_spawn");
    __atomic_store_n(&real_posix_spawnp,
                     (__typeof__(real_posix_spawnp))dlsym(RTLD_NEXT, "posix_spawnp"),
                     __ATOMIC_RELEASE);
}

/* Read exactly n bytes at off; 0 on success. */
static int read_at(int fd, void *buf, size_t n, off_t off)
{
    return pread(fd, buf, n, off) == (ssize_t)n ? 0 : -1;
}

/* What a preload cannot reach in the ELF file at path: "static", "go" or NULL. */
static const char *unreachable(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    const char *why = NULL;
    Elf64_Ehdr eh;
    if (read_at(fd, &eh, sizeof eh, 0) != 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr))
        goto out; /* a script or another format: its interpreter is checked in turn */
    int interp = 0;
    for (unsigned i = 0; i < eh.e_phnum && i < 256; i++) {
        Elf64_Phdr ph;
        if (read_at(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) != 0)
            goto out;
        if (ph.p_type == PT_INTERP)
            interp = 1;
    }
    if (!interp && eh.e_type == ET_EXEC) {
        why = "static";
        goto out;
    }
    if (!interp && eh.e_type == ET_DYN) {
        /* A static PIE has no interpreter either (a shared library is not exec'd). */
        why = "static";
        goto out;
    }
    /* Go: a section named .go.buildinfo or .note.go.buildid. */
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum)
        goto out;
    Elf64_Shdr strs;
    if (read_at(fd, &strs, sizeof strs, (off_t)(eh.e_shoff + eh.e_shstrndx * sizeof strs)) != 0)
        goto out;
    for (unsigned i = 0; i < eh.e_shnum && i < 4096; i++) {
        Elf64_Shdr sh;
        char name[20];
        if (read_at(fd, &sh, sizeof sh, (off_t)(eh.e_shoff + (uint64_t)i * sizeof sh)) != 0)
            break;
        if (sh.sh_name >= strs.sh_size)
            continue;
        ssize_t got = pread(fd, name, sizeof name - 1, (off_t)(strs.sh_offset + sh.sh_name));
        if (got <= 0)
            continue;
        name[got] = 0;
        if (strcmp(name, ".go.buildinfo") == 0 || strcmp(name, ".note.go.buildid") == 0) {
            why = "go";
            break;
        }
    }
out:
    close(fd);
    return why;
}

static void note(const char *path)
{
    const char *log = getenv("FIDELNET_VT_LOG");
    if (!page || !log || !*log || !path)
        return;
    const char *why = unreachable(path);
    if (!why)
        return;
    int fd = open(log, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0)
        return;
    char line[PATH_MAX + 64];
    int n = snprintf(line, sizeof line, "unreached %d %s %s\n", (int)getpid(), why, path);
    if (n > 0 && (size_t)n < sizeof line && write(fd, line, (size_t)n) < 0) {
        /* nothing to do: the program runs on, and the log is best effort */
    }
    close(fd);
}

/* The file execvp would run for name (PATH search when it has no slash). */
static void note_search(const char *name, char *const envp[])
{
    if (!name || !*name)
        return;
    if (strchr(name, '/')) {
        note(name);
        return;
    }
    const char *path = NULL;
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            path = *e + 5;
    if (!path)
        path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char buf[PATH_MAX];
    for (const char *p = path; *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0 && len + 1 + strlen(name) < sizeof buf) {
            memcpy(buf, p, len);
            buf[len] = '/';
            strcpy(buf + len + 1, name);
            if (access(buf, X_OK) == 0) {
                note(buf);
                return;
            }
        }
        if (!end)
            break;
        p = end + 1;
    }
}

int execve(const char *path, char *const argv[], char *const envp[])
{
    resolve();
    note(path);
    return real_execve(path, argv, envp);
}

int execv(const char *path, char *const argv[])
{
    extern char **environ;
    return execve(path, argv, environ);
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
    resolve();
    note_search(file, envp);
    return real_execvpe(file, argv, envp);
}

int execvp(const char *file, char *const argv[])
{
    extern char **environ;
    return execvpe(file, argv, environ);
}

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    resolve();
    note(path);
    return real_posix_spawn(pid, path, fa, attr, argv, envp);
}

int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                 const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    resolve();
    note_search(file, envp);
    return real_posix_spawnp(pid, file, fa, attr, argv, envp);
}
