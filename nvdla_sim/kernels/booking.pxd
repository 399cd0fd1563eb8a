# cython: language_level=3
cdef struct Booking:
    double start            # first request accepted
    double last_request     # last request accepted
    double interval         # cycles between requests
    double port_free        # the port takes the client's next request
    double port_cycles      # cycles the booking held the port
    double first            # first data beat
    double last             # last data beat
    double done             # read: last beat in; write: last response back
    long long requests

cdef int book(object memif, str client, bint read, long long nbytes, double now, Booking* b,
              long long requests=*, object outstanding=*, bint has_first=*, double ready_first=*,
              bint has_last=*, double ready_last=*) except -1

cdef double read_interval(object memif, double req_cycles, object outstanding) except? -1.0
