FROM golang:1.22 AS build
WORKDIR /src
COPY . .
RUN CGO_ENABLED=0 go build -o /greeter ./cmd/greeter
FROM scratch
COPY --from=build /greeter /greeter
EXPOSE 8080
ENTRYPOINT ["/greeter", "-addr", ":8080"]
