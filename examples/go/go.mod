module example.com/prebind-example-go

go 1.19
