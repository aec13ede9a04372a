/*
 * libfidelnet-vt.so: virtual time for every process of a node (issue 11, first part).
 *
 * Preloaded (LD_PRELOAD) with FIDELNET_VT_PAGE naming a shared page that fidelnet
 * writes (fidelnet/vt/page.py): the time dilation factor (TDF) and, per clock family
 * (realtime, monotonic, boottime), an anchor pair (real ns, virtual ns). A process
 * sees, for a real reading r of clock c,
 *
 *     virtual(r) = anchor[c].virt + (r - anchor[c].real) / tdf
 *
 * so each clock keeps its own epoch (virtual monotonic stays monotonic, virtual
 * realtime starts at the real wall time when the node started) and time passes tdf
 * times slower. CPU-time clocks read real / tdf (the node's CPU looks tdf times
 * faster). Readers use the page's seqlock; the writer re-anchors at one real instant
 * when the TDF changes, so no clock jumps.
 *
 * Covered: clock_gettime, gettimeofday, time, timespec_get; nanosleep,
 * clock_nanosleep (relative and absolute), sleep, usleep; poll, ppoll, select,
 * pselect, epoll_wait, epoll_pwait; pthread_cond_timedwait (the condition's own clock)
 * and _clockwait, sem_timedwait and _clockwait, pthread_mutex_timedlock,
 * pthread_timedjoin_np; futex waits through syscall() (Rust's Condvar); timerfd
 * (create/settime/gettime); alarm, setitimer, getitimer. Relative waits wake at least
 * every 50 ms of real time to follow a TDF change.
 *
 * Not yet (issue 11): POSIX timers (timer_*), socket timeouts (SO_RCVTIMEO...),
 * kernel timestamps handed to programs (SO_TIMESTAMP cmsgs, SIOCGSTAMP: ping's RTT),
 * and the detection of static binaries the preload cannot reach.
 *
 * Without FIDELNET_VT_PAGE (or with a page that does not read), every call passes
 * through unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define VT_MAGIC 0x74566e66u /* "fnVt" */
#define VT_VERSION 1u
#define NS 1000000000LL
#define CHUNK_NS 50000000LL /* relative waits re-check the TDF this often */
#define MAX_TIMERFDS 1024

enum { FAM_REALTIME = 0, FAM_MONOTONIC = 1, FAM_BOOTTIME = 2, FAM_CPU = 3, FAM_NONE = 4 };

struct vt_anchor {
    int64_t real_ns;
    int64_t virt_ns;
};

struct vt_page {
    uint32_t magic;
    uint32_t version;
    uint32_t seq; /* odd while the writer is changing the page */
    uint32_t pad;
    double tdf;
    struct vt_anchor a[3];
};

struct vt_view {
    double tdf;
    struct vt_anchor a[3];
};

static const struct vt_page *page;
static int inited;

static int (*real_clock_gettime)(clockid_t, struct timespec *);
static int (*real_clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
static int (*real_poll)(struct pollfd *, nfds_t, int);
static int (*real_ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
static int (*real_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
static int (*real_pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
                           const sigset_t *);
static int (*real_epoll_wait)(int, struct epoll_event *, int, int);
static int (*real_epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
static int (*real_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
static int (*real_cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
                                  const struct timespec *);
static int (*real_sem_timedwait)(sem_t *, const struct timespec *);
static int (*real_sem_clockwait)(sem_t *, clockid_t, const struct timespec *);
static int (*real_mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
static int (*real_timedjoin)(pthread_t, void **, const struct timespec *);
static long (*real_syscall)(long, ...);
static int (*real_timerfd_create)(int, int);
static int (*real_timerfd_settime)(int, int, const struct itimerspec *, struct itimerspec *);
static int (*real_timerfd_gettime)(int, struct itimerspec *);
static unsigned (*real_alarm)(unsigned);
static int (*real_setitimer)(__itimer_which_t, const struct itimerval *, struct itimerval *);
static int (*real_getitimer)(__itimer_which_t, struct itimerval *);

static unsigned char timerfd_clock[MAX_TIMERFDS]; /* clock id + 1 of our timerfds */

#define RESOLVE(var, name) var = (__typeof__(var))dlsym(RTLD_NEXT, name)

static void vt_init(void)
{
    if (__atomic_load_n(&inited, __ATOMIC_ACQUIRE))
        return;
    RESOLVE(real_clock_gettime, "clock_gettime");
    RESOLVE(real_clock_nanosleep, "clock_nanosleep");
    RESOLVE(real_poll, "poll");
    RESOLVE(real_ppoll, "ppoll");
    RESOLVE(real_select, "select");
    RESOLVE(real_pselect, "pselect");
    RESOLVE(real_epoll_wait, "epoll_wait");
    RESOLVE(real_epoll_pwait, "epoll_pwait");
    real_cond_timedwait = dlvsym(RTLD_NEXT, "pthread_cond_timedwait", "GLIBC_2.3.2");
    if (!real_cond_timedwait)
        RESOLVE(real_cond_timedwait, "pthread_cond_timedwait");
    RESOLVE(real_cond_clockwait, "pthread_cond_clockwait");
    RESOLVE(real_sem_timedwait, "sem_timedwait");
    RESOLVE(real_sem_clockwait, "sem_clockwait");
    RESOLVE(real_mutex_timedlock, "pthread_mutex_timedlock");
    RESOLVE(real_timedjoin, "pthread_timedjoin_np");
    RESOLVE(real_syscall, "syscall");
    RESOLVE(real_timerfd_create, "timerfd_create");
    RESOLVE(real_timerfd_settime, "timerfd_settime");
    RESOLVE(real_timerfd_gettime, "timerfd_gettime");
    RESOLVE(real_alarm, "alarm");
    RESOLVE(real_setitimer, "setitimer");
    RESOLVE(real_getitimer, "getitimer");
    const char *path = getenv("FIDELNET_VT_PAGE");
    if (path && *path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            void *m = mmap(NULL, sizeof(struct vt_page), PROT_READ, MAP_SHARED, fd, 0);
            close(fd);
            if (m != MAP_FAILED) {
                const struct vt_page *p = m;
                if (p->magic == VT_MAGIC && p->version == VT_VERSION)
                    page = p;
                else
                    munmap(m, sizeof(struct vt_page));
            }
        }
    }
    __atomic_store_n(&inited, 1, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void vt_constructor(void) { vt_init(); }

/* The page as one consistent snapshot; 0 when time is not dilated. */
static int vt_view(struct vt_view *v)
{
    if (!inited)
        vt_init();
    if (!page)
        return 0;
    for (;;) {
        uint32_t s1 = __atomic_load_n(&page->seq, __ATOMIC_ACQUIRE);
        if (s1 & 1)
            continue;
        v->tdf = page->tdf;
        memcpy(v->a, page->a, sizeof v->a);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&page->seq, __ATOMIC_RELAXED) == s1)
            break;
    }
    return v->tdf > 0; /* even at TDF 1 the anchors hold an offset after a change */
}

static int family(clockid_t c)
{
    switch (c) {
    case CLOCK_REALTIME:
    case CLOCK_REALTIME_COARSE:
    case CLOCK_REALTIME_ALARM:
    case CLOCK_TAI:
        return FAM_REALTIME;
    case CLOCK_MONOTONIC:
    case CLOCK_MONOTONIC_COARSE:
    case CLOCK_MONOTONIC_RAW:
        return FAM_MONOTONIC;
    case CLOCK_BOOTTIME:
    case CLOCK_BOOTTIME_ALARM:
        return FAM_BOOTTIME;
    case CLOCK_PROCESS_CPUTIME_ID:
    case CLOCK_THREAD_CPUTIME_ID:
        return FAM_CPU;
    default:
        return c < 0 ? FAM_CPU : FAM_NONE; /* negative ids: other processes' CPU clocks */
    }
}

static inline int64_t ts_ns(const struct timespec *t) { return t->tv_sec * NS + t->tv_nsec; }

static inline struct timespec ns_ts(int64_t ns)
{
    struct timespec t;
    t.tv_sec = ns / NS;
    t.tv_nsec = ns % NS;
    if (t.tv_nsec < 0) {
        t.tv_nsec += NS;
        t.tv_sec -= 1;
    }
    return t;
}

static int64_t real_now(clockid_t c)
{
    struct timespec t;
    real_clock_gettime(c, &t);
    return ts_ns(&t);
}

static int64_t to_virt(const struct vt_view *v, int fam, int64_t real)
{
    if (fam == FAM_CPU)
        return (int64_t)((double)real / v->tdf);
    const struct vt_anchor *a = &v->a[fam];
    return a->virt_ns + (int64_t)((double)(real - a->real_ns) / v->tdf);
}

static int64_t to_real(const struct vt_view *v, int fam, int64_t virt)
{
    const struct vt_anchor *a = &v->a[fam];
    return a->real_ns + (int64_t)((double)(virt - a->virt_ns) * v->tdf);
}

static clockid_t base_clock(int fam)
{
    return fam == FAM_REALTIME ? CLOCK_REALTIME
           : fam == FAM_BOOTTIME ? CLOCK_BOOTTIME
                                 : CLOCK_MONOTONIC;
}

static int read_with_page(clockid_t c, struct timespec *tp, int *r, struct vt_view *v);

/* The virtual time now on clock family fam, read with the page as one consistent
 * pair (*v is refreshed: a wait follows a TDF change). */
static int64_t virt_now(struct vt_view *v, int fam)
{
    struct timespec t;
    int r;
    if (!read_with_page(base_clock(fam), &t, &r, v))
        return ts_ns(&t);
    return to_virt(v, fam, ts_ns(&t));
}

/* --- reading time ----------------------------------------------------------------- */

/* Read clock c (real) and the page as one consistent pair: a page published while
 * the clock was read is read again with the clock, so no reading combines a new
 * anchor with a real time from before it (a clock would step back when the TDF
 * falls). Returns 1 when time is dilated (then *v is the page). */
static int read_with_page(clockid_t c, struct timespec *tp, int *r, struct vt_view *v)
{
    if (!inited)
        vt_init();
    if (!page) {
        *r = real_clock_gettime(c, tp);
        return 0;
    }
    for (;;) {
        uint32_t s1 = __atomic_load_n(&page->seq, __ATOMIC_ACQUIRE);
        if (s1 & 1)
            continue;
        v->tdf = page->tdf;
        memcpy(v->a, page->a, sizeof v->a);
        *r = real_clock_gettime(c, tp);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&page->seq, __ATOMIC_RELAXED) == s1)
            break;
    }
    return v->tdf > 0; /* even at TDF 1 the anchors hold an offset after a change */
}

int clock_gettime(clockid_t c, struct timespec *tp)
{
    struct vt_view v;
    int r;
    if (!read_with_page(c, tp, &r, &v) || r != 0)
        return r;
    int fam = family(c);
    if (fam == FAM_NONE)
        return r;
    *tp = ns_ts(to_virt(&v, fam, ts_ns(tp)));
    return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec t;
    (void)tz;
    clock_gettime(CLOCK_REALTIME, &t);
    tv->tv_sec = t.tv_sec;
    tv->tv_usec = t.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    if (out)
        *out = t.tv_sec;
    return t.tv_sec;
}

int timespec_get(struct timespec *ts, int base)
{
    if (base != TIME_UTC)
        return 0;
    clock_gettime(CLOCK_REALTIME, ts);
    return base;
}

/* --- sleeping ------------------------------------------------------------------------ */

/* Sleep until the virtual time on family fam reaches deadline, in chunks; on a
 * signal, return EINTR with *left the virtual time still to go. */
static int sleep_until(clockid_t c, int fam, int64_t deadline, int64_t *left)
{
    struct vt_view v;
    for (;;) {
        if (!vt_view(&v)) { /* undilated now: one real wait */
            struct timespec t = ns_ts(deadline);
            int r = real_clock_nanosleep(c, TIMER_ABSTIME, &t, NULL);
            if (r == EINTR && left)
                *left = deadline - real_now(c);
            return r;
        }
        int64_t now = virt_now(&v, fam);
        if (now >= deadline)
            return 0;
        int64_t real_left = (int64_t)((double)(deadline - now) * v.tdf);
        if (real_left > CHUNK_NS)
            real_left = CHUNK_NS;
        struct timespec t = ns_ts(real_left);
        int r = real_clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
        if (r == EINTR) {
            if (left)
                *left = deadline - virt_now(&v, fam);
            return EINTR;
        }
        if (r != 0)
            return r;
    }
}

int clock_nanosleep(clockid_t c, int flags, const struct timespec *req, struct timespec *rem)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    int fam = family(c);
    if (!vt_view(&v) || fam == FAM_NONE || fam == FAM_CPU)
        return real_clock_nanosleep(c, flags, req, rem);
    if (req->tv_nsec < 0 || req->tv_nsec >= NS)
        return EINVAL;
    int64_t deadline = (flags & TIMER_ABSTIME) ? ts_ns(req) : virt_now(&v, fam) + ts_ns(req);
    int64_t left = 0;
    int r = sleep_until(c, fam, deadline, &left);
    if (r == EINTR && rem && !(flags & TIMER_ABSTIME))
        *rem = ns_ts(left > 0 ? left : 0);
    return r;
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
    int r = clock_nanosleep(CLOCK_MONOTONIC, 0, req, rem);
    if (r) {
        errno = r;
        return -1;
    }
    return 0;
}

unsigned sleep(unsigned seconds)
{
    struct timespec t = {.tv_sec = seconds, .tv_nsec = 0}, rem = {0, 0};
    if (nanosleep(&t, &rem) < 0)
        return (unsigned)rem.tv_sec + (rem.tv_nsec > 0);
    return 0;
}

int usleep(useconds_t us)
{
    struct timespec t = ns_ts((int64_t)us * 1000);
    return nanosleep(&t, NULL);
}

/* --- waiting for file descriptors ---------------------------------------------------- */

/* The real milliseconds of the next chunk of a wait whose virtual deadline is given
 * (monotonic); -2: the deadline passed. */
static int chunk_ms(struct vt_view *v, int64_t deadline)
{
    int64_t now = virt_now(v, FAM_MONOTONIC);
    if (now >= deadline)
        return -2;
    int64_t real_left = (int64_t)((double)(deadline - now) * v->tdf);
    if (real_left > CHUNK_NS)
        real_left = CHUNK_NS;
    return (int)((real_left + 999999) / 1000000);
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (timeout <= 0 || !vt_view(&v))
        return real_poll(fds, n, timeout);
    int64_t deadline = virt_now(&v, FAM_MONOTONIC) + (int64_t)timeout * 1000000;
    for (;;) {
        int ms = chunk_ms(&v, deadline);
        if (ms == -2)
            return 0;
        int r = real_poll(fds, n, ms);
        if (r != 0)
            return r;
        vt_view(&v);
    }
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!tmo || ts_ns(tmo) <= 0 || !vt_view(&v))
        return real_ppoll(fds, n, tmo, mask);
    int64_t deadline = virt_now(&v, FAM_MONOTONIC) + ts_ns(tmo);
    for (;;) {
        int ms = chunk_ms(&v, deadline);
        if (ms == -2)
            return 0;
        struct timespec t = ns_ts((int64_t)ms * 1000000);
        int r = real_ppoll(fds, n, &t, mask);
        if (r != 0)
            return r;
        vt_view(&v);
    }
}

static int select_loop(int n, fd_set *r, fd_set *w, fd_set *e, int64_t timeout_ns,
                       const sigset_t *mask, int with_mask)
{
    struct vt_view v;
    vt_view(&v);
    fd_set r0, w0, e0;
    if (r)
        r0 = *r;
    if (w)
        w0 = *w;
    if (e)
        e0 = *e;
    int64_t deadline = virt_now(&v, FAM_MONOTONIC) + timeout_ns;
    for (;;) {
        int ms = chunk_ms(&v, deadline);
        if (ms == -2) {
            if (r)
                FD_ZERO(r);
            if (w)
                FD_ZERO(w);
            if (e)
                FD_ZERO(e);
            return 0;
        }
        if (r)
            *r = r0;
        if (w)
            *w = w0;
        if (e)
            *e = e0;
        int got;
        if (with_mask) {
            struct timespec t = ns_ts((int64_t)ms * 1000000);
            got = real_pselect(n, r, w, e, &t, mask);
        } else {
            struct timeval t = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
            got = real_select(n, r, w, e, &t);
        }
        if (got != 0)
            return got;
        vt_view(&v);
    }
}

int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!tv || (tv->tv_sec == 0 && tv->tv_usec == 0) || !vt_view(&v))
        return real_select(n, r, w, e, tv);
    int got = select_loop(n, r, w, e, tv->tv_sec * NS + tv->tv_usec * 1000LL, NULL, 0);
    if (got == 0)
        tv->tv_sec = tv->tv_usec = 0;
    return got;
}

int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *m)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!t || ts_ns(t) <= 0 || !vt_view(&v))
        return real_pselect(n, r, w, e, t, m);
    return select_loop(n, r, w, e, ts_ns(t), m, 1);
}

static int epoll_loop(int ep, struct epoll_event *ev, int max, int timeout, const sigset_t *m,
                      int with_mask)
{
    struct vt_view v;
    if ((timeout <= 0) || !vt_view(&v))
        return with_mask ? real_epoll_pwait(ep, ev, max, timeout, m)
                         : real_epoll_wait(ep, ev, max, timeout);
    int64_t deadline = virt_now(&v, FAM_MONOTONIC) + (int64_t)timeout * 1000000;
    for (;;) {
        int ms = chunk_ms(&v, deadline);
        if (ms == -2)
            return 0;
        int r = with_mask ? real_epoll_pwait(ep, ev, max, ms, m) : real_epoll_wait(ep, ev, max, ms);
        if (r != 0)
            return r;
        vt_view(&v);
    }
}

int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout)
{
    if (!inited)
        vt_init();
    return epoll_loop(ep, ev, max, timeout, NULL, 0);
}

int epoll_pwait(int ep, struct epoll_event *ev, int max, int timeout, const sigset_t *m)
{
    if (!inited)
        vt_init();
    return epoll_loop(ep, ev, max, timeout, m, 1);
}

/* --- absolute deadlines ------------------------------------------------------------- */

/* A virtual absolute time on clock c as the real absolute time on the same clock. */
static struct timespec real_deadline(const struct vt_view *v, clockid_t c,
                                     const struct timespec *abs)
{
    int fam = family(c);
    if (fam == FAM_NONE || fam == FAM_CPU)
        return *abs;
    return ns_ts(to_real(v, fam, ts_ns(abs)));
}

int pthread_cond_timedwait(pthread_cond_t *restrict cond, pthread_mutex_t *restrict mutex,
                           const struct timespec *restrict abs)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!vt_view(&v))
        return real_cond_timedwait(cond, mutex, abs);
    /* glibc keeps the condition's clock in bit 0 of __wrefs (1: monotonic). */
    clockid_t c = (cond->__data.__wrefs & 1) ? CLOCK_MONOTONIC : CLOCK_REALTIME;
    struct timespec t = real_deadline(&v, c, abs);
    return real_cond_timedwait(cond, mutex, &t);
}

int pthread_cond_clockwait(pthread_cond_t *restrict cond, pthread_mutex_t *restrict mutex,
                           clockid_t c, const struct timespec *restrict abs)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!vt_view(&v))
        return real_cond_clockwait(cond, mutex, c, abs);
    struct timespec t = real_deadline(&v, c, abs);
    return real_cond_clockwait(cond, mutex, c, &t);
}

int sem_timedwait(sem_t *restrict sem, const struct timespec *restrict abs)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!vt_view(&v))
        return real_sem_timedwait(sem, abs);
    struct timespec t = real_deadline(&v, CLOCK_REALTIME, abs);
    return real_sem_timedwait(sem, &t);
}

int sem_clockwait(sem_t *restrict sem, clockid_t c, const struct timespec *restrict abs)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!vt_view(&v))
        return real_sem_clockwait(sem, c, abs);
    struct timespec t = real_deadline(&v, c, abs);
    return real_sem_clockwait(sem, c, &t);
}

int pthread_mutex_timedlock(pthread_mutex_t *restrict m, const struct timespec *restrict abs)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!vt_view(&v))
        return real_mutex_timedlock(m, abs);
    struct timespec t = real_deadline(&v, CLOCK_REALTIME, abs);
    return real_mutex_timedlock(m, &t);
}

int pthread_timedjoin_np(pthread_t th, void **ret, const struct timespec *abs)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!abs || !vt_view(&v))
        return real_timedjoin(th, ret, abs);
    struct timespec t = real_deadline(&v, CLOCK_REALTIME, abs);
    return real_timedjoin(th, ret, &t);
}

/* futex through syscall(): FUTEX_WAIT takes a relative timeout, FUTEX_WAIT_BITSET an
 * absolute one on CLOCK_MONOTONIC (or CLOCK_REALTIME with FUTEX_CLOCK_REALTIME). */
long syscall(long number, ...)
{
    va_list ap;
    long a[6];
    if (!inited)
        vt_init();
    va_start(ap, number);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    struct vt_view v;
    if (number == SYS_futex && a[3] && vt_view(&v)) {
        int op = (int)a[1] & FUTEX_CMD_MASK;
        const struct timespec *tmo = (const struct timespec *)a[3];
        struct timespec t;
        if (op == FUTEX_WAIT) {
            t = ns_ts((int64_t)((double)ts_ns(tmo) * v.tdf));
            a[3] = (long)&t;
        } else if (op == FUTEX_WAIT_BITSET || op == FUTEX_LOCK_PI || op == FUTEX_LOCK_PI2) {
            clockid_t c = (((int)a[1] & FUTEX_CLOCK_REALTIME) || op == FUTEX_LOCK_PI)
                              ? CLOCK_REALTIME
                              : CLOCK_MONOTONIC;
            t = real_deadline(&v, c, tmo);
            a[3] = (long)&t;
        }
        return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    }
    return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* --- timers ---------------------------------------------------------------------------- */

int timerfd_create(int c, int flags)
{
    if (!inited)
        vt_init();
    int fd = real_timerfd_create(c, flags);
    if (fd >= 0 && fd < MAX_TIMERFDS)
        timerfd_clock[fd] = (unsigned char)(c + 1);
    return fd;
}

static struct timespec scale(const struct timespec *t, double f)
{
    return ns_ts((int64_t)((double)ts_ns(t) * f));
}

int timerfd_settime(int fd, int flags, const struct itimerspec *nv, struct itimerspec *old)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!nv || !vt_view(&v))
        return real_timerfd_settime(fd, flags, nv, old);
    clockid_t c = (fd >= 0 && fd < MAX_TIMERFDS && timerfd_clock[fd])
                      ? (clockid_t)(timerfd_clock[fd] - 1)
                      : CLOCK_MONOTONIC;
    struct itimerspec t;
    t.it_interval = scale(&nv->it_interval, v.tdf);
    if (ts_ns(&nv->it_value) == 0)
        t.it_value = nv->it_value; /* disarm */
    else if (flags & TFD_TIMER_ABSTIME)
        t.it_value = real_deadline(&v, c, &nv->it_value);
    else
        t.it_value = scale(&nv->it_value, v.tdf);
    int r = real_timerfd_settime(fd, flags, &t, old);
    if (r == 0 && old) {
        old->it_value = scale(&old->it_value, 1.0 / v.tdf);
        old->it_interval = scale(&old->it_interval, 1.0 / v.tdf);
    }
    return r;
}

int timerfd_gettime(int fd, struct itimerspec *cur)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    int r = real_timerfd_gettime(fd, cur);
    if (r == 0 && vt_view(&v)) {
        cur->it_value = scale(&cur->it_value, 1.0 / v.tdf);
        cur->it_interval = scale(&cur->it_interval, 1.0 / v.tdf);
    }
    return r;
}

static struct timeval tv_scale(const struct timeval *t, double f)
{
    int64_t us = (int64_t)((double)(t->tv_sec * 1000000LL + t->tv_usec) * f);
    struct timeval out = {.tv_sec = us / 1000000, .tv_usec = us % 1000000};
    return out;
}

int setitimer(__itimer_which_t which, const struct itimerval *restrict nv,
              struct itimerval *restrict old)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!nv || which != ITIMER_REAL || !vt_view(&v))
        return real_setitimer(which, nv, old);
    struct itimerval t = {.it_interval = tv_scale(&nv->it_interval, v.tdf),
                          .it_value = tv_scale(&nv->it_value, v.tdf)};
    int r = real_setitimer(which, &t, old);
    if (r == 0 && old) {
        old->it_interval = tv_scale(&old->it_interval, 1.0 / v.tdf);
        old->it_value = tv_scale(&old->it_value, 1.0 / v.tdf);
    }
    return r;
}

int getitimer(__itimer_which_t which, struct itimerval *cur)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    int r = real_getitimer(which, cur);
    if (r == 0 && which == ITIMER_REAL && vt_view(&v)) {
        cur->it_interval = tv_scale(&cur->it_interval, 1.0 / v.tdf);
        cur->it_value = tv_scale(&cur->it_value, 1.0 / v.tdf);
    }
    return r;
}

unsigned alarm(unsigned seconds)
{
    struct itimerval nv = {{0, 0}, {seconds, 0}}, old;
    if (setitimer(ITIMER_REAL, &nv, &old) != 0)
        return 0;
    return (unsigned)old.it_value.tv_sec + (old.it_value.tv_usec > 0);
}
