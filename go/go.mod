module github.com/prebind/prebind/go

go 1.19
