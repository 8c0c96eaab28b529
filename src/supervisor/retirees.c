/* SPDX-License-Identifier: MIT */
/* Generations told to stop: replaced by a new one, a new one that failed,
 * or the rest of an exited one's --group. Each is signalled, SIGKILLed
 * after its grace, reaped, and guarded until nothing of it is left. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guard.h"
#include "log.h"
#include "process.h"
#include "ready.h"
#include "supervisor-internal.h"

static int on_retiree_kill_timer(struct loop *l, struct loop_timer *timer, void *userdata);

/* A generation told to stop has --kill-after, or RETIREE_GRACE_USEC. */
uint64_t retiree_grace(const struct supervisor *s) {
        return s->config->kill_after_usec ?: RETIREE_GRACE_USEC;
}

/* SIGTERM to a COMMAND that is being replaced (or failed to replace the
 * serving one, or exited and left its group): it may drain its
 * connections, within kill_usec; then SIGKILL. reaped: pid has been
 * reaped, its group is what is left. The guard watches it (since it
 * started) until nothing of it is left. */
void retire(struct supervisor *s, pid_t pid, int pidfd, unsigned generation, uint64_t kill_usec, bool reaped) {
        struct retiree *t = malloc(sizeof *t), **grown;
        int r;

        r = signal_process(pid, s->config->group, SIGTERM);
        /* Stopped members would not see it before SIGCONT. */
        if (r >= 0 && s->config->group)
                r = signal_process(pid, true, SIGCONT);
        if (r < 0)
                log_error_errno(r, "cannot stop generation %u (pid %d): %m", generation, (int) pid);
        grown = t ? realloc(s->retirees, (s->n_retirees + 1) * sizeof(struct retiree *)) : NULL;
        if (!grown) {
                /* Unlisted, it is still reaped (SIGCHLD), unkilled; the
                 * guard still stops it if prebind is killed. */
                log_oom();
                free(t);
                unwatch_pidfd(s, &pidfd);
                return;
        }
        *t = (struct retiree) { .s = s, .pid = pid, .pidfd = pidfd, .generation = generation, .reaped = reaped };
        s->retirees = grown;
        s->retirees[s->n_retirees++] = t;
        loop_timer_start(s->loop, &t->kill_timer, kill_usec, on_retiree_kill_timer, t);
        log_debug("generation %u (pid %d) told to stop", generation, (int) pid);
}

static int on_retiree_kill_timer(struct loop *l, struct loop_timer *timer, void *userdata) {
        struct retiree *t = userdata;

        log_info("generation %u (pid %d%s) still running after its grace, sending SIGKILL", t->generation,
                 (int) t->pid, t->s->config->group ? " and its process group" : "");
        (void) signal_process(t->pid, t->s->config->group, SIGKILL);
        return 0;
}

static void retiree_free(struct supervisor *s, struct retiree *t) {
        loop_timer_stop(s->loop, &t->kill_timer);
        unwatch_pidfd(s, &t->pidfd);
        free(t);
}

/* Is pid a retiree? Then it is gone (retirees_sweep() forgets it, once
 * its group is gone too). */
bool retiree_reaped(struct supervisor *s, pid_t pid, int status) {
        for (size_t i = 0; i < s->n_retirees; i++) {
                struct retiree *t = s->retirees[i];

                if (t->pid != pid || t->reaped)
                        continue;
                log_debug("generation %u (pid %d) ended, exit status %d", t->generation, (int) pid, status);
                ready_command_exited(s->job->readiness, pid);
                unwatch_pidfd(s, &t->pidfd);
                t->reaped = true;
                return true;
        }
        return false;
}

/* Forget the retirees of which nothing is left: reaped, and with --group
 * no member of their group (prebind, their subreaper, reaps those). */
void retirees_sweep(struct supervisor *s) {
        for (size_t i = 0; i < s->n_retirees;) {
                struct retiree *t = s->retirees[i];

                if (!t->reaped || (s->config->group && kill(-t->pid, 0) == 0)) {
                        i++;
                        continue;
                }
                guard_unwatch(s->job->guard, t->pid);
                retiree_free(s, t);
                s->retirees[i] = s->retirees[--s->n_retirees];
        }
}

/* A signal for every generation alive: COMMAND, the one serving beside
 * a new one, those told to stop. */
void signal_generations(struct supervisor *s, int sig) {
        if (s->child > 0)
                signal_command(s, sig);
        (void) signal_process(s->previous, s->config->group, sig);
        for (size_t i = 0; i < s->n_retirees; i++)
                if (!s->retirees[i]->reaped || s->config->group)
                        (void) signal_process(s->retirees[i]->pid, s->config->group, sig);
}

/* prebind gives up: none of them may outlive it. */
void retirees_kill(struct supervisor *s) {
        for (size_t i = 0; i < s->n_retirees; i++) {
                (void) signal_process(s->retirees[i]->pid, s->config->group, SIGKILL);
                waitpid(s->retirees[i]->pid, NULL, 0);
        }
}

void retirees_free(struct supervisor *s) {
        for (size_t i = 0; i < s->n_retirees; i++)
                retiree_free(s, s->retirees[i]);
        free(s->retirees);
        s->retirees = NULL;
        s->n_retirees = 0;
}
