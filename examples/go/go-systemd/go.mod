module example.com/prebind-example-go-systemd

go 1.19

require github.com/coreos/go-systemd/v22 v22.3.2

// Debian's golang-github-coreos-go-systemd-dev, used offline. Elsewhere,
// delete the replace lines and let the module proxy fetch v22.
replace (
	github.com/coreos/go-systemd/v22 => /usr/share/gocode/src/github.com/coreos/go-systemd
	github.com/godbus/dbus/v5 => /usr/share/gocode/src/github.com/godbus/dbus
)
