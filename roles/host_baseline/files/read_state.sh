# What host_baseline needs to know about the host, read in one command (each remote task costs
# a round trip). One fact a line, "<kind> <value...>"; tasks/apply.yml parses it. The lists
# come in the environment, space-separated (package, sysctl and unit names have no spaces).
set -f  # the lists are split on spaces, never globbed
if [ -w /proc/sys/kernel/dmesg_restrict ]; then echo "kernel_sysctl writable"; fi
# shellcheck disable=SC2086
dpkg-query -W -f '${Package} ${db:Status-Status}\n' $HOSTCHECK_NTP_DAEMONS 2>/dev/null | sed 's/^/ntp /'
grep -rhsE '^[^#]*(-security|/updates|security\.debian\.org|security\.ubuntu\.com)([[:space:]/]|$)' /etc/apt/sources.list /etc/apt/sources.list.d | sed 's/^/security_source /'
awk '$1 == "UID_MIN" || $1 == "UID_MAX" {print "login_defs", $1, $2}' "$HOSTCHECK_LOGIN_DEFS" 2>/dev/null
# The whole file too: hardening.yml rewrites its keys in place.
if [ -f "$HOSTCHECK_LOGIN_DEFS" ]; then printf 'login_defs_base64 '; base64 -w0 "$HOSTCHECK_LOGIN_DEFS"; echo; fi
# A home counts when it is a directory itself, not a link to one.
getent passwd | while IFS=: read -r _name _password uid _gid _gecos home _shell; do
  if [ -d "$home" ] && [ ! -L "$home" ]; then echo "home $uid $home"; fi
done
# shellcheck disable=SC2086
sysctl -e $HOSTCHECK_SYSCTLS 2>/dev/null | sed 's/^/sysctl /'
for unit in $HOSTCHECK_UNITS; do
  enabled=$(systemctl is-enabled "$unit" 2>/dev/null)
  active=$(systemctl is-active "$unit" 2>/dev/null)
  echo "unit $unit ${enabled:-unknown} ${active:-unknown}"
done
# Only pam-auth-update changes the session stack, and only hardening.yml runs it.
if grep -qs pam_umask.so "$HOSTCHECK_COMMON_SESSION"; then echo "pam_umask active"; fi
if [ -e /var/run/reboot-required ]; then echo "reboot_required"; fi
if [ -d "$HOSTCHECK_NEEDRESTART_CONF_D" ]; then echo "needrestart_conf_d"; fi
true
