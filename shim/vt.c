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
 * Files: vt.c (the page, clock reads, CPU time), vt_wait.c (sleeps, waits for file
 * descriptors and signals, absolute deadlines, futexes), vt_timer.c (timerfd,
 * interval and POSIX timers), vt_net.c (kernel timestamps of sockets, socket
 * timeouts); vt_internal.h holds what they share.
 *
 * Covered: clock_gettime, gettimeofday, time, timespec_get, getrusage, times;
 * nanosleep, clock_nanosleep (relative and absolute), sleep, usleep; poll, ppoll,
 * select, pselect, epoll_wait, epoll_pwait, sigtimedwait; pthread_cond_timedwait (the
 * condition's own clock) and _clockwait, sem_timedwait and _clockwait,
 * pthread_mutex_timedlock, pthread_timedjoin_np; futex waits through syscall()
 * (Rust's Condvar); timerfd, timer_create/settime/gettime, alarm, setitimer,
 * getitimer; SO_TIMESTAMP* control messages (recvmsg, recvmmsg) and SIOCGSTAMP*
 * (ping's RTT); SO_RCVTIMEO/SO_SNDTIMEO, TCP_USER_TIMEOUT, TCP_KEEPIDLE/KEEPINTVL.
 * Relative waits wake at least every 50 ms of real time to follow a TDF change.
 *
 * Not reached: programs that do not call libc's functions (static binaries, Go's
 * own syscalls): fidelnet detects and names them (fidelnet/vt/reach.py).
 *
 * Without FIDELNET_VT_PAGE (or with a page that does not read), every call passes
 * through unchanged.
 */
#include "vt_internal.h"

const struct vt_page *page;
int inited;

int (*real_clock_gettime)(clockid_t, struct timespec *);
int (*real_clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
int (*real_poll)(struct pollfd *, nfds_t, int);
int (*real_ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
int (*real_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
int (*real_pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
                           const sigset_t *);
int (*real_epoll_wait)(int, struct epoll_event *, int, int);
int (*real_epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
int (*real_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
int (*real_cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
                                  const struct timespec *);
int (*real_sem_timedwait)(sem_t *, const struct timespec *);
int (*real_sem_clockwait)(sem_t *, clockid_t, const struct timespec *);
int (*real_mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
int (*real_timedjoin)(pthread_t, void **, const struct timespec *);
long (*real_syscall)(long, ...);
int (*real_timerfd_create)(int, int);
int (*real_timerfd_settime)(int, int, const struct itimerspec *, struct itimerspec *);
int (*real_timerfd_gettime)(int, struct itimerspec *);
unsigned (*real_alarm)(unsigned);
int (*real_setitimer)(__itimer_which_t, const struct itimerval *, struct itimerval *);
int (*real_getitimer)(__itimer_which_t, struct itimerval *);


#define RESOLVE(var, name) var = (__typeof__(var))dlsym(RTLD_NEXT, name)

void vt_init(void)
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
int vt_view(struct vt_view *v)
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

int family(clockid_t c)
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

int64_t real_now(clockid_t c)
{
    struct timespec t;
    real_clock_gettime(c, &t);
    return ts_ns(&t);
}

int64_t to_virt(const struct vt_view *v, int fam, int64_t real)
{
    if (fam == FAM_CPU)
        return (int64_t)((double)real / v->tdf);
    const struct vt_anchor *a = &v->a[fam];
    return a->virt_ns + (int64_t)((double)(real - a->real_ns) / v->tdf);
}

int64_t to_real(const struct vt_view *v, int fam, int64_t virt)
{
    const struct vt_anchor *a = &v->a[fam];
    return a->real_ns + (int64_t)((double)(virt - a->virt_ns) * v->tdf);
}

clockid_t base_clock(int fam)
{
    return fam == FAM_REALTIME ? CLOCK_REALTIME
           : fam == FAM_BOOTTIME ? CLOCK_BOOTTIME
                                 : CLOCK_MONOTONIC;
}

/* The virtual time now on clock family fam, read with the page as one consistent
 * pair (*v is refreshed: a wait follows a TDF change). */
int64_t virt_now(struct vt_view *v, int fam)
{
    struct timespec t;
    int r;
    if (!read_with_page(base_clock(fam), &t, &r, v))
        return ts_ns(&t);
    return to_virt(v, fam, ts_ns(&t));
}

/* A virtual absolute time on clock c as the real absolute time on the same clock. */
struct timespec real_deadline(const struct vt_view *v, clockid_t c,
                              const struct timespec *abs)
{
    int fam = family(c);
    if (fam == FAM_NONE || fam == FAM_CPU)
        return *abs;
    return ns_ts(to_real(v, fam, ts_ns(abs)));
}

/* --- reading time ----------------------------------------------------------------- */

/* Read clock c (real) and the page as one consistent pair: a page published while
 * the clock was read is read again with the clock, so no reading combines a new
 * anchor with a real time from before it (a clock would step back when the TDF
 * falls). Returns 1 when time is dilated (then *v is the page). */
int read_with_page(clockid_t c, struct timespec *tp, int *r, struct vt_view *v)
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

/* CPU time: the node's processes see their CPU time divided by the TDF, as with the
 * CPU-time clocks (a dilated machine looks TDF times faster). */
static int (*real_getrusage)(int, struct rusage *);
static clock_t (*real_times)(struct tms *);

static struct timeval tv_div(struct timeval t, double tdf)
{
    int64_t us = (int64_t)((double)(t.tv_sec * 1000000LL + t.tv_usec) / tdf);
    struct timeval out = {.tv_sec = us / 1000000, .tv_usec = us % 1000000};
    return out;
}

int getrusage(int who, struct rusage *u)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!__atomic_load_n(&real_getrusage, __ATOMIC_ACQUIRE))
        __atomic_store_n(&real_getrusage,
                         (__typeof__(real_getrusage))dlsym(RTLD_NEXT, "getrusage"),
                         __ATOMIC_RELEASE);
    int r = real_getrusage(who, u);
    if (r == 0 && vt_view(&v)) {
        u->ru_utime = tv_div(u->ru_utime, v.tdf);
        u->ru_stime = tv_div(u->ru_stime, v.tdf);
    }
    return r;
}

/* times(): CPU times and the elapsed ticks it returns, both in virtual time. */
clock_t times(struct tms *t)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!__atomic_load_n(&real_times, __ATOMIC_ACQUIRE))
        __atomic_store_n(&real_times, (__typeof__(real_times))dlsym(RTLD_NEXT, "times"),
                         __ATOMIC_RELEASE);
    clock_t r = real_times(t);
    if (r == (clock_t)-1 || !vt_view(&v))
        return r;
    if (t) {
        t->tms_utime = (clock_t)((double)t->tms_utime / v.tdf);
        t->tms_stime = (clock_t)((double)t->tms_stime / v.tdf);
        t->tms_cutime = (clock_t)((double)t->tms_cutime / v.tdf);
        t->tms_cstime = (clock_t)((double)t->tms_cstime / v.tdf);
    }
    /* Elapsed ticks since boot: the virtual boottime clock's. */
    long hz = sysconf(_SC_CLK_TCK);
    return (clock_t)(virt_now(&v, FAM_BOOTTIME) / (NS / (hz > 0 ? hz : 100)));
}
